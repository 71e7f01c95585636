-- Loss detection (docs/design.md §2.8): the bridge records the producer_id
-- and seq of every message it acknowledges, so a hole in a producer's
-- sequence shows. The numbers are kept as contiguous ranges, merged as they
-- arrive, so storage stays at one row per range: a producer whose numbers
-- all arrived holds one row, whatever it sent.
--
-- received_seq_producers: one row per producer ID seen. Recording a number
-- locks it, so concurrent bridges merge one producer's ranges one at a time.
-- received counts the recordings, repeats included.
--
-- received_seq_ranges: the numbers received, as ranges lo..hi that neither
-- overlap nor touch. since is when the first of its numbers was recorded. A
-- hole is the gap below a range (from 1, or from the previous range's hi
-- + 1); it has been open since the earliest "since" of the ranges above
-- it. store.SequenceGaps reads them.

-- orderflow: expand. Additive: a binary of the schema before runs on it.

-- +goose Up

CREATE TABLE received_seq_producers (
    producer_id   text        PRIMARY KEY CHECK (producer_id <> ''),
    received      bigint      NOT NULL DEFAULT 0 CHECK (received >= 0),
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    last_seen_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE received_seq_ranges (
    producer_id text        NOT NULL REFERENCES received_seq_producers ON DELETE CASCADE,
    lo          bigint      NOT NULL CHECK (lo >= 1),
    hi          bigint      NOT NULL CHECK (hi >= lo),
    since       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (producer_id, lo)
);

-- +goose Down

DROP TABLE received_seq_ranges;
DROP TABLE received_seq_producers;
