"""Write bashlex's parser tables for the installed bashlex to worker/shell/bashlex_tables.json.

Run it after upgrading bashlex (``tests/worker/test_bashlex_tables.py`` says when):
``python scripts/write_bashlex_tables.py``. Until then a service builds the tables at every
start, as bashlex itself does.
"""

from worker.shell.bashlex_tables import TABLES_FILE, write_tables

if __name__ == "__main__":
    write_tables()
    print(f"wrote {TABLES_FILE}")
