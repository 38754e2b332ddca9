package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
)

// licenseFinder reads each Go module's license from its LICENSE (or
// LICENCE, COPYING) file in the module cache, as go-licenses does: no
// network, and only what the module itself ships says what it is. A
// module not in the cache, or a text it does not recognise, is
// NOASSERTION, never a guess.
type licenseFinder struct {
	modcache string
	cache    map[string]string
}

func newLicenseFinder() *licenseFinder {
	dir := os.Getenv("GOMODCACHE")
	if dir == "" {
		if out, err := exec.Command("go", "env", "GOMODCACHE").Output(); err == nil {
			dir = strings.TrimSpace(string(out))
		}
	}
	return &licenseFinder{modcache: dir, cache: map[string]string{}}
}

// module is path@version's SPDX license expression, or "".
func (f *licenseFinder) module(path, version string) string {
	key := path + "@" + version
	if l, ok := f.cache[key]; ok {
		return l
	}
	l := ""
	if f.modcache != "" && version != "" && version != "(devel)" {
		l = licenseOfDir(filepath.Join(f.modcache, escapeModule(path)+"@"+escapeModule(version)))
	}
	f.cache[key] = l
	return l
}

// licenseOfDir is the licenses of the files at the top of a module's
// directory, joined with AND (a module that ships two licenses is under
// both); "" when it has none recognised.
func licenseOfDir(dir string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	var ids []string
	for _, e := range entries {
		n := strings.ToUpper(e.Name())
		if e.IsDir() || (!strings.HasPrefix(n, "LICENSE") && !strings.HasPrefix(n, "LICENCE") && !strings.HasPrefix(n, "COPYING")) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if id := classifyLicense(string(data)); id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return strings.Join(ids, " AND ")
}

// classifyLicense names a license text by the sentences that set each
// apart; the order matters where one text quotes another's words.
func classifyLicense(text string) string {
	t := strings.Join(strings.Fields(text), " ")
	has := func(s string) bool { return strings.Contains(t, s) }
	switch {
	case has("Apache License") && has("Version 2.0"):
		return "Apache-2.0"
	case has("Mozilla Public License") && has("2.0"):
		return "MPL-2.0"
	case has("Permission is hereby granted, free of charge"):
		return "MIT"
	case has("Permission to use, copy, modify, and/or distribute this software for any purpose"),
		has("Permission to use, copy, modify, and distribute this software for any purpose with or without fee"):
		return "ISC"
	case has("Redistribution and use in source and binary forms"):
		if has("Neither the name") || has("names of its contributors") || has("name of the copyright holder") {
			return "BSD-3-Clause"
		}
		return "BSD-2-Clause"
	}
	return ""
}

// escapeModule is the module cache's case encoding: an upper-case letter
// is '!' and its lower case (golang.org/x/mod/module.EscapePath).
func escapeModule(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsUpper(r) {
			b.WriteByte('!')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
