-- Sequence numbers in one round trip (docs/design.md §2.8): the bridge's
-- group commit of sequence numbers took a transaction of five statements
-- (the producer's row, the ranges near the numbers, the ranges replaced,
-- the ranges written, the commit), each a round trip to PostgreSQL, for
-- what is usually one number. orderflow_record_seqs does the same work in
-- the server in one call: for each producer, in the order of their IDs, it
-- locks and counts the producer's row, then merges the numbers no range
-- holds into the ranges they touch, rewriting only the ranges that change
-- (a range of new numbers only is received since now; a merged range keeps
-- the earliest since of those it joined). Same tables and rows as before:
-- bridges of the schema before record beside it, serialized by the same
-- row lock.

-- orderflow: expand. A function only: a binary of the schema before runs on it.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION orderflow_record_seqs(p_producers text[], p_seqs bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    producer text;
    seqs     bigint[];
    news     bigint[];
    gone     bigint[];
    los      bigint[];
    his      bigint[];
    sinces   timestamptz[];
    deleted  integer;
BEGIN
    IF cardinality(p_producers) IS DISTINCT FROM cardinality(p_seqs) THEN
        RAISE EXCEPTION 'orderflow_record_seqs: % producer IDs for % numbers',
            cardinality(p_producers), cardinality(p_seqs);
    END IF;
    FOR producer, seqs IN
        SELECT n.p, array_agg(n.s) FROM unnest(p_producers, p_seqs) AS n(p, s) GROUP BY n.p ORDER BY n.p
    LOOP
        INSERT INTO received_seq_producers AS r (producer_id, received) VALUES (producer, cardinality(seqs))
        ON CONFLICT (producer_id) DO UPDATE SET received = r.received + EXCLUDED.received, last_seen_at = now();

        SELECT array_agg(DISTINCT s ORDER BY s) INTO news FROM unnest(seqs) AS s
        WHERE NOT EXISTS (SELECT 1 FROM received_seq_ranges r
                          WHERE r.producer_id = producer AND r.lo <= s AND r.hi >= s);
        CONTINUE WHEN news IS NULL;

        WITH parts AS (
            SELECT r.lo, r.hi, r.since, true AS old FROM received_seq_ranges r
            WHERE r.producer_id = producer AND r.lo <= news[cardinality(news)] + 1 AND r.hi >= news[1] - 1
            UNION ALL
            SELECT s, s, NULL::timestamptz, false FROM unnest(news) AS s
        ), marked AS (
            SELECT parts.*, CASE WHEN lo <= max(hi) OVER (ORDER BY lo, hi ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) + 1
                                 THEN 0 ELSE 1 END AS brk
            FROM parts
        ), grouped AS (
            SELECT marked.*, sum(brk) OVER (ORDER BY lo, hi ROWS UNBOUNDED PRECEDING) AS g FROM marked
        ), islands AS (
            SELECT min(lo) AS lo, max(hi) AS hi, min(since) AS since,
                   array_agg(lo) FILTER (WHERE old) AS olds, bool_or(NOT old) AS has_new
            FROM grouped GROUP BY g
        )
        SELECT (SELECT coalesce(array_agg(x), '{}') FROM islands i, unnest(i.olds) AS x WHERE i.has_new),
               array_agg(lo) FILTER (WHERE has_new), array_agg(hi) FILTER (WHERE has_new),
               array_agg(since) FILTER (WHERE has_new)
        INTO gone, los, his, sinces FROM islands;

        DELETE FROM received_seq_ranges WHERE producer_id = producer AND lo = ANY (gone);
        GET DIAGNOSTICS deleted = ROW_COUNT;
        IF deleted <> cardinality(gone) THEN
            RAISE EXCEPTION 'ranges of producer % changed under its lock', producer;
        END IF;
        INSERT INTO received_seq_ranges (producer_id, lo, hi, since)
        SELECT producer, t.lo, t.hi, coalesce(t.since, now()) FROM unnest(los, his, sinces) AS t(lo, hi, since);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down

DROP FUNCTION orderflow_record_seqs(text[], bigint[]);
