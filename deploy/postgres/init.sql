-- docker-compose.yml: runs once, when the postgres volume is first created.
-- The orderflow database and role come from POSTGRES_DB/POSTGRES_USER; this
-- adds Temporal's role and databases (its schema is set up by the temporal
-- service).
CREATE ROLE temporal LOGIN PASSWORD 'temporal';
CREATE DATABASE temporal OWNER temporal;
CREATE DATABASE temporal_visibility OWNER temporal;
