// Package lru is the small cache trafilatura uses to spot repeated text
// (part of the go-trafilatura copy, see ../../doc.go).
package lru
