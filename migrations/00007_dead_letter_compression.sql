-- Compressed bodies in dead letters.
--
-- dead_letters.body_compression: the compression a parked body is still in,
-- as the message's system flag named it ('zlib', 'lz4', 'zstd', or 'type N'
-- for a type RocketMQ does not define), or '' when the body is as the
-- producer wrote it (plain, or inflated by the bridge's client). The bridge
-- parks a compressed body as stored when it would inflate past 64 KiB
-- (reason 'oversize: compressed body inflates past 65536 bytes') or cannot
-- be decoded (reason 'undecodable: <compression> body: <error>');
-- `orderflow dlq replay` decodes it again by this column.
--
-- Earlier releases inflated zlib only, and parked a body refused for its
-- size with the oversize reason and no column to say so: those rows are
-- zlib, and are marked so here.

-- orderflow: contract, oldest binary 7. The backfill below marks the rows
-- parked so far once; a binary of schema 6 would go on parking oversize
-- compressed bodies without the column, to be read as uncompressed.

-- +goose Up

ALTER TABLE dead_letters ADD COLUMN body_compression text NOT NULL DEFAULT ''
    CHECK (body_compression ~ '^(zlib|lz4|zstd|type [4-7])?$');
UPDATE dead_letters SET body_compression = 'zlib'
    WHERE reason = 'oversize: compressed body inflates past 65536 bytes';

-- +goose Down

ALTER TABLE dead_letters DROP COLUMN body_compression;
