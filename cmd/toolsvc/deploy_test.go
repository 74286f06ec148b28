package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
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

// TestKubernetesNamesSettings keeps the TOOLSVC_* names of the Kubernetes
// manifests and the Secret's example to settings the service knows: one it
// does not know stops every replica's start-up. (deploy/k8s's own module
// tests the manifests against the Kubernetes API types.)
func TestKubernetesNamesSettings(t *testing.T) {
	t.Parallel()
	var env []string
	err := filepath.WalkDir(filepath.Join("..", "..", "deploy", "k8s"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".env.example")) {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range regexp.MustCompile(`\b(TOOLSVC_[A-Z0-9_]+)\b`).FindAllStringSubmatch(string(b), -1) {
			env = append(env, m[1]+"=x")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(env) < 8 {
		t.Fatalf("only %d TOOLSVC_* names in deploy/k8s", len(env))
	}
	if err := config.CheckNames(env); err != nil {
		t.Error(err)
	}
}
