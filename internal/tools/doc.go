// Package tools holds the tools toolsvc offers a model, one file each.
// Each implements registry.Tool, takes the parts it needs (workspace,
// network guard, sandbox, browser, agent manager, channels) through its
// constructor, and turns every failure a model can act on into a toolerr
// error whose message says what to do next. internal/app builds them and
// registers the ones the configuration switches on.
package tools
