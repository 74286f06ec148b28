-- Calls held for a person's approval, shared by every replica: any
-- replica can list and decide them, and the call runs on whichever
-- replica it is sent to again. body is the whole approval as JSON; the
-- columns beside it are what the statements look it up by.
CREATE TABLE approvals (
    id         text PRIMARY KEY,
    key        text NOT NULL,
    tool       text NOT NULL,
    sha256     text NOT NULL,
    status     text NOT NULL,
    used       boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    body       jsonb NOT NULL
);
CREATE INDEX approvals_call ON approvals (key, tool, sha256);
CREATE INDEX approvals_pending ON approvals (created_at) WHERE status = 'pending';
