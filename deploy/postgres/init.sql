-- docker-compose.yml: runs once, when the postgres volume is first created,
-- as the orderflow role (POSTGRES_USER) on database orderflow (POSTGRES_DB).
--
-- orderflow's two roles: orderflow, the database's owner, is the one
-- `orderflow migrate` (the compose service migrate) runs as; it alone
-- changes the schema. orderflow_app is the runtime role of the worker, the
-- bridge and the other orderflow commands: it reads and writes rows of
-- orderflow's tables and uses their sequences, and may not create, alter
-- or drop anything. The owner grants it those rights on every table and
-- sequence it creates from now on, so that each migration's new tables are
-- covered without a grant of their own.
CREATE ROLE orderflow_app LOGIN PASSWORD 'orderflow_app';
GRANT CONNECT ON DATABASE orderflow TO orderflow_app;
ALTER DEFAULT PRIVILEGES FOR ROLE orderflow IN SCHEMA public
	GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO orderflow_app;
ALTER DEFAULT PRIVILEGES FOR ROLE orderflow IN SCHEMA public
	GRANT USAGE ON SEQUENCES TO orderflow_app;
-- PostgreSQL 15 and later let only the owner create in schema public;
-- say so for older servers too.
REVOKE CREATE ON SCHEMA public FROM PUBLIC;

-- Temporal's role and databases (its schema is set up by the temporal
-- service).
CREATE ROLE temporal LOGIN PASSWORD 'temporal';
CREATE DATABASE temporal OWNER temporal;
CREATE DATABASE temporal_visibility OWNER temporal;
