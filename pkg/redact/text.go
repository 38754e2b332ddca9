package redact

import (
	"regexp"
	"strings"
)

var (
	// "key": "value" (JSON, also escaped inside a JSON string)
	quotedPair = regexp.MustCompile(`(\\?"([A-Za-z0-9_.\-]+)\\?"\s*:\s*)(\\?"((?:[^"\\]|\\[^"])*)\\?")`)
	// key: value (YAML), at the start of a line or of a list item
	yamlPair = regexp.MustCompile(`^(\s*(?:-\s+)?([A-Za-z0-9_.\-]+)\s*:[ \t]+)(.*?)\s*$`)
	// key: inside a line (a message quoting a document); the value follows
	inlineKey = regexp.MustCompile(`(^|[\s"'{,;(\[])([A-Za-z0-9_.\-]+):[ \t]+`)
	// an unquoted value inside a line, up to what ends it in a quoted text
	inlineValue = regexp.MustCompile(`^[^\s"'\\,;)}\]]+`)
	// a quoted value inside a line
	quotedValue = regexp.MustCompile(`^"(?:[^"\\]|\\.)*"`)
	// key=value (logs, CNI_ARGS, query strings)
	assignPair = regexp.MustCompile(`(^|[\s;,&?{(])([A-Za-z0-9_.\-]+)=("(?:[^"\\]|\\.)*"|[^\s;,&)}]*)`)
	// a YAML block scalar's indicator: the value is the lines below
	blockScalar = regexp.MustCompile(`^[|>][-+0-9]*$`)
)

// Text gives s back with its secrets replaced by Mark, line for line (the
// lines of a block scalar under a secret's key replaced by one), and how
// many it replaced: for logs, YAML and documents held in strings.
func Text(s []byte) ([]byte, int) {
	n := 0
	text := scrub(string(s), &n)
	lines := strings.Split(text, "\n")
	out := lines[:0]
	for i := 0; i < len(lines); i++ {
		line, block := textLine(lines[i], &n)
		out = append(out, line)
		if block < 0 {
			continue
		}
		for i+1 < len(lines) && (strings.TrimSpace(lines[i+1]) == "" || indent(lines[i+1]) > block) {
			i++ // the block scalar's lines: gone with its Mark
		}
	}
	return []byte(strings.Join(out, "\n")), n
}

// textLine redacts one line. block is the indentation of a secret's key
// whose value is a block scalar (its lines follow), else -1.
func textLine(line string, n *int) (string, int) {
	block := -1
	if m := yamlPair.FindStringSubmatchIndex(line); m != nil && !strings.HasPrefix(strings.TrimSpace(line), `"`) {
		key, val := line[m[4]:m[5]], line[m[6]:m[7]]
		if c := classify(key); blockScalar.MatchString(val) && c != plain {
			*n++
			return line[:m[6]] + Mark, indent(line)
		} else if !keepsText(c, val) {
			*n++
			return line[:m[6]] + Mark, block
		}
	}
	line = quotedPair.ReplaceAllStringFunc(line, func(pair string) string {
		m := quotedPair.FindStringSubmatch(pair)
		if keeps(classify(m[2]), unescape(m[4])) {
			return pair
		}
		*n++
		q := `"`
		if strings.HasPrefix(m[3], `\"`) {
			q = `\"`
		}
		return m[1] + q + Mark + q
	})
	line = inlineValues(line, n)
	line = assignPair.ReplaceAllStringFunc(line, func(pair string) string {
		m := assignPair.FindStringSubmatch(pair)
		if keepsText(classify(m[2]), m[3]) {
			return pair
		}
		*n++
		return m[1] + m[2] + "=" + Mark
	})
	return line, block
}

// inlineValues redacts the values of secrets' keys written "key: value"
// anywhere in line, also inside a quoted value of another key, from the
// last to the first so that the spans found stay valid.
func inlineValues(line string, n *int) string {
	keys := inlineKey.FindAllStringSubmatchIndex(line, -1)
	for i := len(keys) - 1; i >= 0; i-- {
		k := keys[i]
		class := classify(line[k[4]:k[5]])
		if class == plain {
			continue
		}
		rest := line[k[1]:]
		v := quotedValue.FindString(rest)
		if v == "" {
			v = inlineValue.FindString(rest)
		}
		if v == "" || keepsText(class, v) {
			continue
		}
		*n++
		line = line[:k[1]] + Mark + rest[len(v):]
	}
	return line
}

// keepsText is keeps for a value as text shows it: quoted or not, and
// booleans and numbers kept.
func keepsText(c keyClass, v string) bool {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		v = v[1 : len(v)-1]
	}
	return scalar(v) || keeps(c, v)
}

func unescape(s string) string { return strings.ReplaceAll(s, `\/`, `/`) }

func indent(line string) int { return len(line) - len(strings.TrimLeft(line, " \t")) }
