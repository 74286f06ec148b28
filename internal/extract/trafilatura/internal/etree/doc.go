// Package etree gives golang.org/x/net/html nodes the text/tail model of
// Python's ElementTree, which trafilatura's code is written against (part
// of the go-trafilatura copy, see ../../doc.go).
package etree
