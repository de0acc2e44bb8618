"""Evidence: verification on the server, exports, streams, reports."""
