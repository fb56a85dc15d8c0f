"""What the live view (`specrun web`) and `specrun status` read: the event hub and the state."""
