"""The PostgreSQL engine of the storage seam."""
