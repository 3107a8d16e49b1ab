package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// TestDeployFilesNameRealSettings reads the shipped deployment files (the
// single edge's and the cluster's): every TUNA_EDGE_ variable they set is
// a flag of serve, and the manifests are valid YAML, so an example cannot
// drift from the binary.
func TestDeployFilesNameRealSettings(t *testing.T) {
	known := map[string]bool{}
	newServe().Flags().VisitAll(func(f *pflag.Flag) { known[envName(f.Name)] = true })
	files, err := filepath.Glob("../../deploy/*")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("../../deploy/cluster/*")
	files = append(files, more...)
	setting := regexp.MustCompile(`TUNA_EDGE_[A-Z0-9_]+`)
	seen := 0
	for _, f := range files {
		if fi, err := os.Stat(f); err != nil || fi.IsDir() {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range setting.FindAllString(string(b), -1) {
			seen++
			if !known[name] {
				t.Errorf("%s sets %s, which is no flag of tuna-edge serve", f, name)
			}
		}
		if filepath.Ext(f) == ".yaml" {
			dec := yaml.NewDecoder(bytes.NewReader(b))
			for {
				var doc map[string]any
				err := dec.Decode(&doc)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				if doc["kind"] == nil || doc["apiVersion"] == nil {
					t.Errorf("%s: a document without kind or apiVersion: %v", f, doc)
				}
			}
		}
	}
	if seen < 30 {
		t.Fatalf("only %d settings found in %v: the files moved?", seen, files)
	}
}
