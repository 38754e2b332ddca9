package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Licenses are read from each module's own file in the module cache: a
// known text is named, an unknown one or a module not there is left
// NOASSERTION, never guessed.
func TestModuleLicenses(t *testing.T) {
	cache := t.TempDir()
	write := func(dir, name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(cache, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cache, dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("example.com/apache@v1.0.0", "LICENSE", "                                 Apache License\n                           Version 2.0, January 2004\n")
	write("github.com/!burnt!sushi/toml@v1.4.0", "COPYING", "The MIT License (MIT)\n\nPermission is hereby granted, free of charge, to any person")
	write("example.com/bsd@v0.1.0", "LICENSE", "Redistribution and use in source and binary forms, with or without\nmodification, are permitted ... Neither the name of Google Inc. nor")
	write("example.com/two@v2.0.0", "LICENSE-MIT", "Permission is hereby granted, free of charge,")
	write("example.com/two@v2.0.0", "LICENSE-APACHE", "Apache License Version 2.0")
	write("example.com/odd@v1.0.0", "LICENSE", "All rights reserved. Ask us.")
	f := &licenseFinder{modcache: cache, cache: map[string]string{}}
	for mod, want := range map[[2]string]string{
		{"example.com/apache", "v1.0.0"}:         "Apache-2.0",
		{"github.com/BurntSushi/toml", "v1.4.0"}: "MIT",
		{"example.com/bsd", "v0.1.0"}:            "BSD-3-Clause",
		{"example.com/two", "v2.0.0"}:            "Apache-2.0 AND MIT",
		{"example.com/odd", "v1.0.0"}:            "",
		{"example.com/absent", "v1.0.0"}:         "",
	} {
		if got := f.module(mod[0], mod[1]); got != want {
			t.Errorf("%s@%s: %q, want %q", mod[0], mod[1], got, want)
		}
	}
}

// The modules capo links, read from this machine's module cache as a
// release reads them: each is named, none NOASSERTION.
func TestRealModulesLicenses(t *testing.T) {
	mods := map[string]string{
		"k8s.io/client-go":                       "Apache-2.0",
		"github.com/prometheus/client_golang":    "Apache-2.0",
		"github.com/google/go-containerregistry": "Apache-2.0",
		"golang.org/x/sys":                       "BSD-3-Clause",
		"github.com/sirupsen/logrus":             "MIT",
	}
	var args []string
	for m := range mods {
		args = append(args, m)
	}
	out, err := exec.Command("go", append([]string{"list", "-m", "-f", "{{.Path}} {{.Version}}"}, args...)...).Output()
	if err != nil {
		t.Skipf("go list -m: %v", err)
	}
	f := newLicenseFinder()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, version, _ := strings.Cut(line, " ")
		if got := f.module(path, version); got != mods[path] {
			t.Errorf("%s@%s: %q, want %q", path, version, got, mods[path])
		}
	}
}
