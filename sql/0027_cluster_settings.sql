-- The shard settings every process of one cluster must share (src/entities/Cluster.ts, checkClusterSettings): the
-- first process to start records them, and a process started with other ones refuses to start, naming them.
CREATE TABLE cluster_settings (
  name text PRIMARY KEY,
  value text NOT NULL,
  recorded_at timestamptz NOT NULL
);
