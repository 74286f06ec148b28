// Package selector holds the rules by which trafilatura finds content,
// comments and metadata, and what it discards (part of the go-trafilatura
// copy, see ../../doc.go).
package selector
