-- Sub-agent tasks: the columns the replicas query on, and the task as
-- GET /agents/{id} shows it (data).
CREATE TABLE agent_tasks (
    id               text PRIMARY KEY,
    owner            text NOT NULL DEFAULT '',
    status           text NOT NULL,
    replica          text NOT NULL,
    created_at       timestamptz NOT NULL,
    heartbeat        timestamptz NOT NULL DEFAULT now(),
    cancel_requested boolean NOT NULL DEFAULT false,
    data             jsonb NOT NULL
);
CREATE INDEX agent_tasks_running ON agent_tasks (heartbeat) WHERE status = 'running';
CREATE INDEX agent_tasks_created ON agent_tasks (created_at DESC, id);

-- A task's events, numbered from 1 by the replica running it.
CREATE TABLE agent_events (
    task_id text NOT NULL REFERENCES agent_tasks (id) ON DELETE CASCADE,
    n       integer NOT NULL,
    data    jsonb NOT NULL,
    PRIMARY KEY (task_id, n)
);

-- send_message's conversations, one per API key and session; key is a
-- hash of both.
CREATE TABLE conversations (
    key        text PRIMARY KEY,
    owner      text NOT NULL,
    session    text NOT NULL,
    messages   jsonb NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX conversations_updated ON conversations (updated_at DESC);
