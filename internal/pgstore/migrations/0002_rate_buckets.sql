-- Keys' token buckets (the policy file's rate), one row per key name,
-- shared by every replica: tokens as they were at updated_at, which is
-- the database's clock. taken says whether the last take took a token.
-- UNLOGGED: a take is then no WAL write and its commit waits for no disk
-- sync; a crash of the database (or a failover to a standby) empties the
-- table, which gives each key one full burst again, as a restart of a
-- single replica always did.
CREATE UNLOGGED TABLE rate_buckets (
    key        text PRIMARY KEY,
    tokens     double precision NOT NULL,
    taken      boolean NOT NULL,
    updated_at timestamptz NOT NULL
);

-- The replicas taking from rate_buckets, each seen every few seconds: how
-- many share a key's rate when the buckets cannot be reached.
CREATE UNLOGGED TABLE rate_replicas (
    replica text PRIMARY KEY,
    seen    timestamptz NOT NULL
);
