package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/countbot/toolsvc/internal/config"
)

// TestEnvExampleNamesSettings keeps deploy/.env.example, which compose
// passes to the service line by line, to names the service knows: a
// misspelt or removed setting there would stop the container's start-up.
// Commented lines count too, since operators uncomment them.
func TestEnvExampleNamesSettings(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, m := range regexp.MustCompile(`(?m)^#? ?(TOOLSVC_[A-Z0-9_]+)=`).FindAllStringSubmatch(string(b), -1) {
		env = append(env, m[1]+"=x")
	}
	if len(env) < 20 {
		t.Fatalf("only %d TOOLSVC_* lines in deploy/.env.example", len(env))
	}
	if err := config.CheckNames(env); err != nil {
		t.Error(err)
	}
}
