// Package htmldate stands in for github.com/markusmobius/go-htmldate in
// toolsvc's build (see the replace directive in toolsvc's go.mod).
//
// go-trafilatura imports go-htmldate to find a page's publication date, and
// go-htmldate imports go-dateparser, whose package initialisation compiles
// regular expressions for every locale it knows: half a second and about
// 27 MB of live heap at every start of the service, which took toolsvc's
// idle memory from 12 MiB to over 60 MiB. toolsvc never asks for dates
// (web_fetch sets trafilatura's HtmlDateMode to Disabled, so FromDocument is
// never called) and reports none, so this package keeps the API trafilatura
// compiles against and finds no date.
package htmldate

import (
	"errors"
	"time"

	"golang.org/x/net/html"
)

// Options mirrors go-htmldate's options; they are accepted and ignored.
type Options struct {
	ExtractTime         bool
	UseOriginalDate     bool
	URL                 string
	MinDate             time.Time
	MaxDate             time.Time
	EnableLog           bool
	SkipExtensiveSearch bool
	DeferUrlExtractor   bool
}

// Result mirrors go-htmldate's result.
type Result struct {
	DateTime    time.Time
	HasTime     bool
	HasTimezone bool
}

// IsZero reports whether no date was found.
func (r Result) IsZero() bool { return r.DateTime.IsZero() }

// Format formats the date with layout.
func (r Result) Format(layout string) string { return r.DateTime.Format(layout) }

// ErrNotExtracted is returned by FromDocument: this build extracts no dates.
var ErrNotExtracted = errors.New("htmldate: publication dates are not extracted in this build")

// FromDocument finds no date.
func FromDocument(doc *html.Node, opts Options) (Result, error) {
	return Result{}, ErrNotExtracted
}
