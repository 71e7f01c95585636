-- The schema window: which binaries may run on this schema.
--
-- orderflow_schema.oldest_binary is the oldest binary schema version (the
-- newest migration a binary embeds) allowed to run on this schema. A binary
-- runs on its own schema and on any newer one whose oldest_binary it meets:
-- expand migrations leave the value as it is, so the previous release keeps
-- running through an upgrade and after a rollback; a contract migration
-- (one that removes or restricts what an older binary uses) raises it to
-- the first schema whose binaries no longer need what it removes. Every
-- migration says which it is in a line "orderflow: expand" or "orderflow:
-- contract, oldest binary N" (migrations.Kinds; a test holds the two
-- together). 00002 and 00007 were contract steps, so the window starts at 7.

-- orderflow: expand. Additive: a binary of the schema before runs on it.

-- +goose Up

CREATE TABLE orderflow_schema (
    singleton     boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    oldest_binary bigint  NOT NULL CHECK (oldest_binary >= 1)
);
INSERT INTO orderflow_schema (oldest_binary) VALUES (7);

-- +goose Down

DROP TABLE orderflow_schema;
