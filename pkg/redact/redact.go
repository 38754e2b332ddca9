// Package redact takes secrets out of what capo shows people: the node
// view capo-agent gives `capoctl bundle`, and every file of a bundle. A CNI
// config may hold credentials (older Calico manifests put k8s_auth_token,
// or etcd keys, in the netconf), a ConfigMap may hold anything, and a
// support archive travels far. It is pure: bytes in, bytes out.
//
// What goes: the values of keys named like a secret (token, password,
// secret, credential, auth, and key or certificate data), unless the value
// is a file path, which names where a secret is and is kept; and, whatever
// their key, PEM blocks, base64 of PEM, JSON Web Tokens and bearer or
// basic credentials. A name that is only "key" (a label selector's, a
// key/value list's) is not a secret's.
package redact

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// Mark takes the place of what was removed.
const Mark = "<redacted>"

// secretWords make a key's value a secret, whatever the value.
var secretWords = map[string]bool{
	"token": true, "tokens": true, "password": true, "passwords": true, "passwd": true, "pass": true,
	"passphrase": true, "pwd": true, "secret": true, "secrets": true, "credential": true, "credentials": true,
	"auth": true, "authorization": true, "apikey": true, "bearer": true, "privatekey": true,
}

// materialWords make a key's value a secret unless it is a file path: key
// and certificate data, and kubeconfigs, are often given inline.
var materialWords = map[string]bool{
	"key": true, "keys": true, "cert": true, "certs": true, "certificate": true, "certificates": true,
	"pem": true, "kubeconfig": true, "crt": true,
}

// referenceWords end a name whose value only names a secret: secretName,
// tokenSecretRef, keySelector.
var referenceWords = map[string]bool{
	"name": true, "names": true, "ref": true, "refs": true, "selector": true, "namespace": true,
	"kind": true, "type": true, "id": true,
}

// keyClass is what a key's name says about its value.
type keyClass int

const (
	plain    keyClass = iota
	material          // a secret unless a file path
	secret            // a secret
)

// classify reads a key's name as words: k8s_auth_token, clientKeyData,
// client-key-data, ETCD_KEY_FILE.
func classify(name string) keyClass {
	words := splitWords(name)
	if len(words) == 0 || referenceWords[words[len(words)-1]] {
		return plain
	}
	if len(words) == 1 && (words[0] == "key" || words[0] == "keys") {
		return plain // a map entry's key: label selectors, key/value lists
	}
	class := plain
	for _, w := range words {
		switch {
		case secretWords[w]:
			return secret
		case materialWords[w]:
			class = material
		}
	}
	return class
}

// splitWords splits a name at every non-letter-or-digit and at each
// lower-to-upper change, lower-cased.
func splitWords(name string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	var prev rune
	for _, r := range name {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
		prev = r
	}
	flush()
	return words
}

var (
	pathLike = regexp.MustCompile(`^/[^\s]*$`)
	// material found anywhere, whatever its key
	pemBlock   = regexp.MustCompile(`(?s)-----BEGIN [A-Z0-9 ]+-----.*?(-----END [A-Z0-9 ]+-----|$)`)
	pemBase64  = regexp.MustCompile(`LS0tLS1CRUdJTi[A-Za-z0-9+/=]*`)
	jwt        = regexp.MustCompile(`eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`)
	authScheme = regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}`)
)

// keeps says whether a value under a key of class c may stay.
func keeps(c keyClass, v string) bool {
	switch {
	case c == plain || v == "" || v == Mark:
		return true
	case c == material:
		return pathLike.MatchString(v) && !strings.Contains(v, "-----")
	}
	return false
}

// scalar says whether a text value is no secret whatever its key: a
// boolean, a number, null.
func scalar(v string) bool {
	switch v {
	case "true", "false", "null", "~", "True", "False":
		return true
	}
	_, err := strconv.ParseFloat(v, 64)
	return err == nil
}

// scrub replaces what is a secret whatever its key, and counts.
func scrub(s string, n *int) string {
	for _, re := range []*regexp.Regexp{pemBlock, pemBase64, jwt, authScheme} {
		s = re.ReplaceAllStringFunc(s, func(string) string { *n++; return Mark })
	}
	return s
}
