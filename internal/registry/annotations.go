package registry

// Annotations describe a tool to the people and clients that offer it to
// a model, beyond the name, description and schema the model reads: a
// title to show, and hints of what a call does to its environment (MCP's
// tool annotations). Every hint must be true of the tool: a client may
// run a read-only tool without asking, and ask before a destructive one.
type Annotations struct {
	// Title is a short name for people ("Read file").
	Title string
	// ReadOnly: a call changes nothing outside the service.
	ReadOnly bool
	// Destructive: a call may change or delete what exists (meaningful
	// when not ReadOnly).
	Destructive bool
	// Idempotent: calling again with the same arguments has no further
	// effect (meaningful when not ReadOnly).
	Idempotent bool
	// OpenWorld: a call may reach entities outside the service (the
	// internet, a chat platform, a model).
	OpenWorld bool
}

// Annotated is implemented by tools that state their annotations: the
// built-in tools (their tooldef declaration's Title and Hints), tools from
// a file (its hints) and tools of a mounted MCP server (the server's). A
// tool that does not has none: no title, and no hint holds.
type Annotated interface {
	Annotations() Annotations
}
