// Package trafilatura finds the main content and the metadata of a web
// page. It is github.com/markusmobius/go-trafilatura v1.12.2 (Apache-2.0,
// see LICENSE; copyright Markus Mobius), itself a port of the Python
// trafilatura, copied into toolsvc with its helper packages (internal/etree,
// internal/lru, internal/re2go with its re2c sources, internal/selector).
//
// It is a copy rather than a module dependency because upstream imports
// github.com/markusmobius/go-htmldate, which imports go-dateparser, whose
// package initialisation compiles regular expressions for every locale it
// knows: about 36 MiB of heap and 1.5-2.6 s at every start of toolsvc,
// which never asks for a date. Replacing go-htmldate with a stub through a
// replace directive kept `go install .../cmd/toolsvc@version` from working.
//
// What was changed from v1.12.2, and why:
//   - Publication dates are not looked for: the HtmlDateMode,
//     HtmlDateOptions and HtmlDateOverride options, Metadata.Date and the
//     date requirement of HasEssentialMetadata are gone, with go-htmldate
//     and go-dateparser.
//   - The fallback to go-readability and go-domdistiller (EnableFallback,
//     FallbackCandidates, external.go) is gone: toolsvc runs readability
//     itself and compares the answers its own way (internal/extract), and
//     go-domdistiller's package initialisation cost about 10 ms at start-up.
//   - The language check (TargetLanguage, and detecting the language of the
//     text with whatlanggo for Metadata.Language) is gone: toolsvc does not
//     filter by language, and whatlanggo's tables cost about 2 ms at
//     start-up. Metadata.Language still comes from the page's markup.
//   - Emoji are removed from author names by a small function
//     (removeEmojis) instead of github.com/forPelevin/gomoji, whose package
//     initialisation builds its table (about 3 ms, 1 MB) at start-up.
//   - ExtractResult.Baseline and OwnLength tell when the content is the
//     rescue of an extraction that found too little (baseline.go), and
//     how much that extraction found: upstream weighs its fallback
//     against that extraction before any rescue, and toolsvc does the
//     same with readability.
//   - CreateReadableDocument (helper.go), unused, and the functions the
//     removals left unused (validTagCatalog, lru's Cache.Remove) are gone.
//   - The regular expressions of metadata.go are compiled on first use
//     (sync.OnceValue), not at every start of the program.
//   - Imports point into toolsvc; the code is gofmt-formatted; each helper
//     package has a doc.go.
//   - Tests: the ones that need upstream's 147 MB of real-world pages
//     (realworld, metadata-realworld) are left out, and so are the
//     assertions on the removed features (marked in trafilatura_test.go);
//     the rest run on testdata/ (upstream's test-files/simple, and
//     mock/exotic_tags.html).
//
// scripts/test.sh leaves the folder out of toolsvc's function length and
// complexity limits, so that the code stays as its authors wrote it and can
// be compared with upstream; vet, staticcheck and deadcode do check it.
package trafilatura
