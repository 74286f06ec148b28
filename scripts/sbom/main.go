// Command sbom writes a CycloneDX 1.5 JSON software bill of materials for
// a Go binary, from the build information the go command wrote into it
// (what go version -m prints): the main module with the version given,
// every module linked in, and the build's settings. It reads the binary
// only, so it works offline and for any GOOS and GOARCH.
//
//	go run ./scripts/sbom -version v0.1.0 dist/toolsvc-v0.1.0-linux-amd64 >toolsvc.cdx.json
//
// scripts/release.sh writes one for each binary it builds.
package main

import (
	"crypto/rand"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

func main() {
	version := flag.String("version", "", "the version of the main module (default: the one in the build information)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: sbom [-version V] BINARY >BOM.cdx.json")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := write(os.Stdout, flag.Arg(0), *version); err != nil {
		fmt.Fprintln(os.Stderr, "sbom:", err)
		os.Exit(1)
	}
}

type bom struct {
	BOMFormat    string       `json:"bomFormat"`
	SpecVersion  string       `json:"specVersion"`
	SerialNumber string       `json:"serialNumber"`
	Version      int          `json:"version"`
	Metadata     metadata     `json:"metadata"`
	Components   []component  `json:"components"`
	Dependencies []dependency `json:"dependencies"`
}

type metadata struct {
	Timestamp string    `json:"timestamp"`
	Tools     tools     `json:"tools"`
	Component component `json:"component"`
}

type tools struct {
	Components []component `json:"components"`
}

type component struct {
	Type       string     `json:"type"`
	BOMRef     string     `json:"bom-ref,omitempty"`
	Name       string     `json:"name"`
	Version    string     `json:"version,omitempty"`
	PURL       string     `json:"purl,omitempty"`
	Hashes     []hash     `json:"hashes,omitempty"`
	Properties []property `json:"properties,omitempty"`
}

type hash struct {
	Alg     string `json:"alg"`
	Content string `json:"content"`
}

type property struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type dependency struct {
	Ref       string   `json:"ref"`
	DependsOn []string `json:"dependsOn"`
}

func purl(path, version string) string { return "pkg:golang/" + path + "@" + version }

// write writes the bill of materials of the binary at path to w.
func write(w io.Writer, path, version string) error {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return err
	}
	bin, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(bin)
	if version == "" {
		version = bi.Main.Version
	}
	// The build's settings (GOOS, GOARCH, -trimpath, -ldflags, vcs.*)
	// and the toolchain, as properties of the binary.
	props := []property{{"go:toolchain", bi.GoVersion}}
	for _, s := range bi.Settings {
		props = append(props, property{"go:build:" + s.Key, s.Value})
	}
	app := component{
		Type: "application", BOMRef: purl(bi.Main.Path, version), Name: bi.Main.Path, Version: version,
		PURL: purl(bi.Main.Path, version), Properties: props,
		Hashes: []hash{{"SHA-256", hex.EncodeToString(sum[:])}},
	}
	b := bom{
		BOMFormat: "CycloneDX", SpecVersion: "1.5", SerialNumber: serial(), Version: 1,
		Metadata: metadata{
			Timestamp: timestamp().Format(time.RFC3339),
			Tools:     tools{Components: []component{{Type: "application", Name: "toolsvc scripts/sbom"}}},
			Component: app,
		},
		Components:   []component{},
		Dependencies: []dependency{{Ref: app.BOMRef, DependsOn: []string{}}},
	}
	for _, d := range bi.Deps {
		// A replaced module is built from its replacement: that is the
		// code in the binary.
		if d.Replace != nil {
			d = d.Replace
		}
		c := component{Type: "library", BOMRef: purl(d.Path, d.Version), Name: d.Path, Version: d.Version, PURL: purl(d.Path, d.Version)}
		// The go.sum hash (h1:, a SHA-256 over the module's file list)
		// is no plain hash of an artifact, so it goes in a property.
		if d.Sum != "" {
			c.Properties = []property{{"go:module:sum", d.Sum}}
		}
		b.Components = append(b.Components, c)
		b.Dependencies[0].DependsOn = append(b.Dependencies[0].DependsOn, c.BOMRef)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(b); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return nil
}

// timestamp is SOURCE_DATE_EPOCH when set (reproducible builds' clock),
// else now.
func timestamp() time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(n, 0).UTC()
		}
	}
	return time.Now().UTC()
}

// serial is a random (version 4) UUID URN: each bill of materials written
// is a new document, as CycloneDX asks.
func serial() string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read does not fail
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("urn:uuid:%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}
