-- The job's cross-rank questions from the Parquet dataset alone (no aorta, no manifest),
-- as views: rank_totals (per-rank comm and compute time), instance_skew (per collective
-- instance: arrivals, skew, last rank, caused) and stragglers (the ranking).
-- Definitions: docs/METRICS.md and docs/COLLECTIVES.md; docs/SCALE.md says what differs.
--
--   duckdb -c "SET VARIABLE dataset = 'aorta-data'" -c ".read scale/queries.duckdb.sql" \
--          -c "FROM stragglers ORDER BY run, straggler_rank"
--
-- Only the first statement is DuckDB's own (the source); everything after the PORTABLE line
-- is plain SQL with window functions that Spark SQL runs unchanged (scale/spark_queries.py).
-- Every time is an exact integer of nanoseconds: the numbers equal aorta's to the ns.

CREATE OR REPLACE TEMP VIEW gpu_activities AS
SELECT * FROM read_parquet(getvariable('dataset') || '/gpu_activities/**/*.parquet',
                           hive_partitioning = true);

-- PORTABLE (from here on: Spark SQL too)

-- Per rank: |U(comm)| and |U(compute)| over the whole capture, every stream together
-- (compute = gemm, attention, other_compute). A union's length is the sum of its islands:
-- an interval starts a new island when it starts after every earlier one has ended.
CREATE OR REPLACE TEMP VIEW class_intervals AS
SELECT run, rank,
       CASE WHEN category = 'comm' THEN 'comm' ELSE 'compute' END AS class,
       start_ns, GREATEST(end_ns, start_ns) AS end_ns
FROM gpu_activities
WHERE category IN ('comm', 'gemm', 'attention', 'other_compute');

CREATE OR REPLACE TEMP VIEW class_islands AS
SELECT run, rank, class, start_ns, end_ns,
       SUM(CASE WHEN prev_end IS NULL OR start_ns > prev_end THEN 1 ELSE 0 END)
         OVER (PARTITION BY run, rank, class ORDER BY start_ns, end_ns
               ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS island
FROM (SELECT run, rank, class, start_ns, end_ns,
             MAX(end_ns) OVER (PARTITION BY run, rank, class ORDER BY start_ns, end_ns
                               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
      FROM class_intervals) t;

CREATE OR REPLACE TEMP VIEW rank_totals AS
SELECT r.run, r.rank,
       COALESCE(SUM(CASE WHEN u.class = 'comm' THEN u.len END), 0) AS comm_ns,
       COALESCE(SUM(CASE WHEN u.class = 'compute' THEN u.len END), 0) AS compute_ns
FROM (SELECT DISTINCT run, rank FROM gpu_activities) r
LEFT JOIN (SELECT run, rank, class, island, MAX(end_ns) - MIN(start_ns) AS len
           FROM class_islands GROUP BY run, rank, class, island) u
  ON u.run = r.run AND u.rank = r.rank
GROUP BY r.run, r.rank;

-- Comm kernels, each numbered in its process group on its rank: the trace's Seq where every
-- kernel of the group has one, else launch order (the correlation id where every comm kernel
-- of the rank has one, else the start). The group: Process Group Name, else the ranks list,
-- else `default`.
CREATE OR REPLACE TEMP VIEW comm_kernels AS
SELECT run, rank, pg, comm_op, start_ns, end_ns,
       CASE WHEN all_seq = 1 THEN collective_seq
            ELSE ROW_NUMBER() OVER (PARTITION BY run, rank, pg
                                    ORDER BY CASE WHEN by_corr = 1 THEN correlation ELSE start_ns END,
                                             start_ns, end_ns) - 1
       END AS seq
FROM (SELECT run, rank, COALESCE(process_group, process_group_ranks, 'default') AS pg,
             comm_op, start_ns, GREATEST(end_ns, start_ns) AS end_ns, correlation, collective_seq,
             MIN(CASE WHEN correlation IS NULL THEN 0 ELSE 1 END) OVER (PARTITION BY run, rank) AS by_corr,
             MIN(CASE WHEN collective_seq IS NULL THEN 0 ELSE 1 END)
               OVER (PARTITION BY run, rank, COALESCE(process_group, process_group_ranks, 'default')) AS all_seq
      FROM gpu_activities WHERE category = 'comm') k;

-- An instance (group, seq) is paired when every rank that has kernels of the group has it,
-- the group has two ranks or more, and they agree on the kind.
CREATE OR REPLACE TEMP VIEW paired_instances AS
SELECT k.run, k.pg, k.seq
FROM comm_kernels k
JOIN (SELECT run, pg, COUNT(DISTINCT rank) AS present FROM comm_kernels GROUP BY run, pg) g
  ON g.run = k.run AND g.pg = k.pg
GROUP BY k.run, k.pg, k.seq, g.present
HAVING COUNT(DISTINCT k.rank) = g.present AND g.present > 1
   AND COUNT(DISTINCT k.comm_op) <= 1 AND COUNT(*) = g.present;

-- Clock offset of rank r: the median over the paired instances it shares with the reference
-- (the lowest rank with comm kernels) of end_r - end_ref; an even count takes the mean of the
-- two middle values, rounded down. Ranks that share none with the reference get none here.
CREATE OR REPLACE TEMP VIEW end_differences AS
SELECT k.run, k.rank, k.end_ns - r.end_ns AS d
FROM comm_kernels k
JOIN paired_instances p ON p.run = k.run AND p.pg = k.pg AND p.seq = k.seq
JOIN (SELECT run, MIN(rank) AS ref FROM comm_kernels GROUP BY run) f ON f.run = k.run
JOIN comm_kernels r ON r.run = k.run AND r.pg = k.pg AND r.seq = k.seq AND r.rank = f.ref;

CREATE OR REPLACE TEMP VIEW clock_offsets AS
SELECT run, rank, CAST(FLOOR(CAST(SUM(d) AS DOUBLE) / COUNT(*)) AS BIGINT) AS clock_offset_ns
FROM (SELECT run, rank, d,
             ROW_NUMBER() OVER (PARTITION BY run, rank ORDER BY d) AS i,
             COUNT(*) OVER (PARTITION BY run, rank) AS n
      FROM end_differences) t
WHERE i = FLOOR((n + 1) / 2.0) OR i = FLOOR(n / 2.0) + 1
GROUP BY run, rank;

-- Per paired instance: arrivals (start - offset), skew = last - first arrival, the last rank
-- (ties: the lowest rank) and caused = last - second-to-last arrival.
CREATE OR REPLACE TEMP VIEW arrivals AS
SELECT k.run, k.pg, k.seq, k.rank, k.start_ns - o.clock_offset_ns AS arrival_ns,
       ROW_NUMBER() OVER (PARTITION BY k.run, k.pg, k.seq
                          ORDER BY k.start_ns - o.clock_offset_ns DESC, k.rank) AS from_last
FROM comm_kernels k
JOIN paired_instances p ON p.run = k.run AND p.pg = k.pg AND p.seq = k.seq
JOIN clock_offsets o ON o.run = k.run AND o.rank = k.rank;

CREATE OR REPLACE TEMP VIEW instance_skew AS
SELECT run, pg AS process_group, seq,
       MIN(arrival_ns) AS first_arrival_ns,
       MAX(arrival_ns) AS last_arrival_ns,
       MAX(arrival_ns) - MIN(arrival_ns) AS skew_ns,
       MAX(CASE WHEN from_last = 1 THEN rank END) AS last_rank,
       MAX(CASE WHEN from_last = 1 THEN arrival_ns END)
         - MAX(CASE WHEN from_last = 2 THEN arrival_ns END) AS caused_ns
FROM arrivals
GROUP BY run, pg, seq;

-- Stragglers: per rank, the instances it was last at and the delay it alone caused there,
-- ranked by caused, then times last, then rank.
CREATE OR REPLACE TEMP VIEW stragglers AS
SELECT run, rank, times_last, caused_ns,
       ROW_NUMBER() OVER (PARTITION BY run ORDER BY caused_ns DESC, times_last DESC, rank) AS straggler_rank
FROM (SELECT r.run, r.rank,
             COUNT(s.seq) AS times_last,
             COALESCE(SUM(s.caused_ns), 0) AS caused_ns
      FROM (SELECT DISTINCT run, rank FROM comm_kernels) r
      LEFT JOIN instance_skew s ON s.run = r.run AND s.last_rank = r.rank
      GROUP BY r.run, r.rank) t;
