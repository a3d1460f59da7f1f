package translate

import (
	"bytes"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is a small validating JSON scanner over byte slices. It never allocates unless a string holds escapes
// and its decoded value is needed. It accepts exactly what encoding/json.Valid accepts (a fuzz test checks that).

// maxDepth bounds nesting, as encoding/json does, so hostile input cannot exhaust the stack.
const maxDepth = 10000

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipWS(in []byte, p int) int {
	for p < len(in) && isSpace(in[p]) {
		p++
	}
	return p
}

// scanString expects in[p] == '"' and returns the index after the closing quote and whether the string holds
// escapes.
func scanString(in []byte, p int) (end int, esc bool, err error) {
	p++
	for {
		for p < len(in) && in[p] >= 0x20 && in[p] != '"' && in[p] != '\\' {
			p++
		}
		if p >= len(in) {
			return 0, false, errSyntax("unterminated string", len(in))
		}
		switch c := in[p]; {
		case c == '"':
			return p + 1, esc, nil
		case c == '\\':
			esc = true
			if p+1 >= len(in) {
				return 0, false, errSyntax("unterminated escape", p)
			}
			switch in[p+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p += 2
			case 'u':
				if p+6 > len(in) {
					return 0, false, errSyntax("short \\u escape", p)
				}
				for _, h := range in[p+2 : p+6] {
					if !isHex(h) {
						return 0, false, errSyntax("invalid \\u escape", p)
					}
				}
				p += 6
			default:
				return 0, false, errSyntax("invalid escape", p)
			}
		default:
			return 0, false, errSyntax("control character in string", p)
		}
	}
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// scanNumber expects the first byte of a number at in[p] and returns the index after it.
func scanNumber(in []byte, p int) (int, error) {
	start := p
	if p < len(in) && in[p] == '-' {
		p++
	}
	switch {
	case p < len(in) && in[p] == '0':
		p++
	case p < len(in) && in[p] >= '1' && in[p] <= '9':
		for p < len(in) && in[p] >= '0' && in[p] <= '9' {
			p++
		}
	default:
		return 0, errSyntax("invalid number", start)
	}
	if p < len(in) && in[p] == '.' {
		p++
		if p >= len(in) || in[p] < '0' || in[p] > '9' {
			return 0, errSyntax("invalid number", start)
		}
		for p < len(in) && in[p] >= '0' && in[p] <= '9' {
			p++
		}
	}
	if p < len(in) && (in[p] == 'e' || in[p] == 'E') {
		p++
		if p < len(in) && (in[p] == '+' || in[p] == '-') {
			p++
		}
		if p >= len(in) || in[p] < '0' || in[p] > '9' {
			return 0, errSyntax("invalid number", start)
		}
		for p < len(in) && in[p] >= '0' && in[p] <= '9' {
			p++
		}
	}
	return p, nil
}

func scanLiteral(in []byte, p int, lit string) (int, error) {
	if !bytes.HasPrefix(in[p:], []byte(lit)) {
		return 0, errSyntax("invalid literal", p)
	}
	return p + len(lit), nil
}

// skipValue validates and skips the value starting at in[p] (no leading whitespace).
func skipValue(in []byte, p, depth int) (int, error) {
	if p >= len(in) {
		return 0, errSyntax("unexpected end of input", p)
	}
	switch c := in[p]; {
	case c == '{':
		if depth >= maxDepth {
			return 0, errDepth(p)
		}
		p = skipWS(in, p+1)
		if p < len(in) && in[p] == '}' {
			return p + 1, nil
		}
		for {
			if p >= len(in) || in[p] != '"' {
				return 0, errSyntax("expected member name", p)
			}
			var err error
			if p, _, err = scanString(in, p); err != nil {
				return 0, err
			}
			p = skipWS(in, p)
			if p >= len(in) || in[p] != ':' {
				return 0, errSyntax("expected ':'", p)
			}
			if p, err = skipValue(in, skipWS(in, p+1), depth+1); err != nil {
				return 0, err
			}
			p = skipWS(in, p)
			if p < len(in) && in[p] == ',' {
				p = skipWS(in, p+1)
				continue
			}
			if p < len(in) && in[p] == '}' {
				return p + 1, nil
			}
			return 0, errSyntax("expected ',' or '}'", p)
		}
	case c == '[':
		if depth >= maxDepth {
			return 0, errDepth(p)
		}
		p = skipWS(in, p+1)
		if p < len(in) && in[p] == ']' {
			return p + 1, nil
		}
		for {
			var err error
			if p, err = skipValue(in, p, depth+1); err != nil {
				return 0, err
			}
			p = skipWS(in, p)
			if p < len(in) && in[p] == ',' {
				p = skipWS(in, p+1)
				continue
			}
			if p < len(in) && in[p] == ']' {
				return p + 1, nil
			}
			return 0, errSyntax("expected ',' or ']'", p)
		}
	case c == '"':
		end, _, err := scanString(in, p)
		return end, err
	case c == 't':
		return scanLiteral(in, p, "true")
	case c == 'f':
		return scanLiteral(in, p, "false")
	case c == 'n':
		return scanLiteral(in, p, "null")
	case c == '-' || c >= '0' && c <= '9':
		return scanNumber(in, p)
	default:
		return 0, errSyntax("unexpected character", p)
	}
}

// validJSON reports whether in holds exactly one JSON value, surrounded by optional whitespace.
func validJSON(in []byte) bool {
	p, err := skipValue(in, skipWS(in, 0), 0)
	return err == nil && skipWS(in, p) == len(in)
}

// unquote decodes the JSON string literal lit (quotes included, already validated).
func unquote(lit []byte) string {
	s := lit[1 : len(lit)-1]
	if bytes.IndexByte(s, '\\') < 0 {
		return string(s)
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		switch s[i+1] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(s[i+2 : i+6])
			i += 6
			if utf16.IsSurrogate(r) {
				if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
					if r2 := utf16.DecodeRune(r, hex4(s[i+2:i+6])); r2 != utf8.RuneError {
						out = utf8.AppendRune(out, r2)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
			continue
		default: // " \ /
			out = append(out, s[i+1])
		}
		i += 2
	}
	return string(out)
}

func hex4(b []byte) rune {
	v, _ := strconv.ParseUint(string(b), 16, 32)
	return rune(v)
}

// appendQuoted appends s as a JSON string literal. Group and CRD names are plain ASCII; anything else (a version
// that arrived with escapes) is escaped the way encoding/json does, minus HTML escaping.
func appendQuoted(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// memberValue finds the member key of the object starting at in[obj] ('{') and returns its value's span. The
// object has been or will be validated by the caller; errors here only mean "not found".
func memberValue(in []byte, obj int, key string) (start, end int, ok bool) {
	p := skipWS(in, obj+1)
	for p < len(in) && in[p] == '"' {
		kEnd, esc, err := scanString(in, p)
		if err != nil {
			return 0, 0, false
		}
		match := false
		if esc {
			match = unquote(in[p:kEnd]) == key
		} else {
			match = string(in[p+1:kEnd-1]) == key
		}
		p = skipWS(in, kEnd)
		if p >= len(in) || in[p] != ':' {
			return 0, 0, false
		}
		vs := skipWS(in, p+1)
		ve, err := skipValue(in, vs, 1)
		if err != nil {
			return 0, 0, false
		}
		if match {
			return vs, ve, true
		}
		p = skipWS(in, ve)
		if p >= len(in) || in[p] != ',' {
			return 0, 0, false
		}
		p = skipWS(in, p+1)
	}
	return 0, 0, false
}

// stringMember returns the decoded string value of member key of the object at in[obj], or "" if it is absent or
// not a string.
func stringMember(in []byte, obj int, key string) string {
	s, e, ok := memberValue(in, obj, key)
	if !ok || in[s] != '"' {
		return ""
	}
	return unquote(in[s:e])
}

// arrayHasString reports whether the array value in[s:e] holds a string element satisfying pred.
func arrayHasString(in []byte, s, e int, pred func(string) bool) bool {
	if in[s] != '[' {
		return false
	}
	p := skipWS(in, s+1)
	for p < e && in[p] != ']' {
		ve, err := skipValue(in, p, 1)
		if err != nil {
			return false
		}
		if in[p] == '"' && pred(unquote(in[p:ve])) {
			return true
		}
		p = skipWS(in, ve)
		if p < e && in[p] == ',' {
			p = skipWS(in, p+1)
		}
	}
	return false
}
