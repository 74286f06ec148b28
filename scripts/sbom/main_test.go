package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestWrite: the bill of materials of a Go binary (this test's own, which
// carries build information as any go build does) is CycloneDX 1.5 JSON
// that names the version given, the binary's SHA-256, the build settings
// and every module linked in, each listed as a dependency of the binary.
func TestWrite(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := write(&out, bin, "v9.8.7-test"); err != nil {
		t.Fatal(err)
	}
	var b bom
	if err := json.Unmarshal(out.Bytes(), &b); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	app := b.Metadata.Component
	if b.BOMFormat != "CycloneDX" || b.SpecVersion != "1.5" || !strings.HasPrefix(b.SerialNumber, "urn:uuid:") {
		t.Errorf("header: %s %s %s", b.BOMFormat, b.SpecVersion, b.SerialNumber)
	}
	if app.Version != "v9.8.7-test" || app.PURL != "pkg:golang/github.com/countbot/toolsvc@v9.8.7-test" ||
		len(app.Hashes) != 1 || len(app.Hashes[0].Content) != 64 {
		t.Errorf("the binary: %+v", app)
	}
	settings := map[string]bool{}
	for _, p := range app.Properties {
		settings[p.Name] = true
	}
	if !settings["go:toolchain"] || !settings["go:build:GOOS"] || !settings["go:build:GOARCH"] {
		t.Errorf("the build settings are missing: %+v", app.Properties)
	}
	if len(b.Dependencies) != 1 || len(b.Dependencies[0].DependsOn) != len(b.Components) {
		t.Errorf("dependencies %+v do not list the %d components", b.Dependencies, len(b.Components))
	}
	for _, c := range b.Components {
		if c.Type != "library" || c.Version == "" || c.PURL != "pkg:golang/"+c.Name+"@"+c.Version {
			t.Errorf("component %+v", c)
		}
	}
}
