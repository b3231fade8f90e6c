"""What the capture knows of tables: shapes and schema versions, topic names, DDL
capture (dropped tables), and the JSON Schema of the events."""
