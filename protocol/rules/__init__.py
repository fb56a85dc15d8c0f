"""Shared policies: protected and runs-later paths, tool categories."""
