"""The SQLite engine of the storage seam."""
