// Package docscheck keeps the repository's citations true: a comment or a page may cite a document only if the
// repository holds it. It finds section signs outside RFC citations (the numbered sections of documents the
// repository does not hold), docs/ paths that do not exist, numbered sections after a docs/ path, and headings
// cited by name (docs/<page>.md, section "Heading") that the page does not have. Its test runs it over every Go and
// Markdown file of the repository as part of `go test ./...`.
package docscheck

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Finding is one false citation.
type Finding struct {
	File    string
	Line    int
	Message string
}

func (f Finding) String() string { return fmt.Sprintf("%s:%d: %s", f.File, f.Line, f.Message) }

// Docs answers what the repository holds: whether a path (relative to the repository root, slash-separated) exists,
// and the headings of a Markdown file (ok false when it cannot be read).
type Docs interface {
	Exists(path string) bool
	Headings(path string) (headings []string, ok bool)
}

const sectionSign = "\u00a7"

var (
	// rfcBefore is what may stand right before a section sign: "RFC 9110 " in "RFC 9110 <sign>13.1.1".
	rfcBefore = regexp.MustCompile(`RFC \d+ $`)
	// docsPath is a docs/ path not preceded by another path character (so a/docs/<page>.md and URLs do not count).
	docsPath = regexp.MustCompile(`(^|[^A-Za-z0-9_./-])(docs/[A-Za-z0-9_./-]+\.md)`)
	// numberedAfter is a numbered section right after a docs/ path: "docs/<page>.md A.9.1", "docs/<page>.md, section 3.2".
	numberedAfter = regexp.MustCompile(`^[,:]?\s*(?:(?:[A-Z]\.)?\d+(?:\.\d+)+\b|section\s+\d)`)
	// headingAfter is a heading cited by name right after a docs/ path: `docs/<page>.md, section "Heading"`.
	headingAfter = regexp.MustCompile(`^,\s*(?:section\s+)?"([^"]+)"`)
	// generated is Go's marker of a generated file.
	generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)
)

// Check returns the false citations of one file's text; name is how findings name the file.
func Check(name, text string, docs Docs) []Finding {
	var out []Finding
	for i, line := range strings.Split(text, "\n") {
		add := func(format string, args ...any) {
			out = append(out, Finding{File: name, Line: i + 1, Message: fmt.Sprintf(format, args...)})
		}
		for at := 0; ; {
			k := strings.Index(line[at:], sectionSign)
			if k < 0 {
				break
			}
			at += k
			if !rfcBefore.MatchString(line[:at]) {
				add("section sign outside an RFC citation: state the rule, or cite a docs/ page by its heading")
			}
			at += len(sectionSign)
		}
		for _, m := range docsPath.FindAllStringSubmatchIndex(line, -1) {
			path, rest := line[m[4]:m[5]], line[m[5]:]
			if !docs.Exists(path) {
				add("%s does not exist", path)
				continue
			}
			if numberedAfter.MatchString(rest) {
				add("%s has no numbered sections: cite a heading by name", path)
			}
			if h := headingAfter.FindStringSubmatch(rest); h != nil && !hasHeading(docs, path, h[1]) {
				add("%s has no heading %q", path, h[1])
			}
		}
	}
	return out
}

func hasHeading(docs Docs, path, want string) bool {
	hs, ok := docs.Headings(path)
	if !ok {
		return false
	}
	for _, h := range hs {
		if h == want || strings.ReplaceAll(h, "`", "") == want {
			return true
		}
	}
	return false
}

// Headings returns the ATX headings of Markdown text, without their #s, outside fenced code blocks.
func Headings(text string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimLeft(line, "#")
		if h != line && strings.HasPrefix(h, " ") {
			out = append(out, strings.TrimSpace(h))
		}
	}
	return out
}

// skipDirs are never walked: version control, dependencies, build output, local state and test data (which may
// quote other projects' text verbatim).
var skipDirs = map[string]bool{".git": true, "vendor": true, "node_modules": true, "testdata": true, "bin": true,
	"dist": true}

// Repo checks every Go and Markdown file under root (generated Go files, hidden directories and skipDirs excepted).
func Repo(root string) ([]Finding, error) {
	docs := dirDocs(root)
	var out []Finding
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (skipDirs[name] || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, ".md") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := string(b)
		if strings.HasSuffix(name, ".go") && generated.MatchString(text) {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		out = append(out, Check(filepath.ToSlash(rel), text, docs)...)
		return nil
	})
	return out, err
}

// dirDocs answers from the files under a directory.
type dirDocs string

func (d dirDocs) Exists(path string) bool {
	_, err := os.Stat(filepath.Join(string(d), filepath.FromSlash(path)))
	return err == nil
}

func (d dirDocs) Headings(path string) ([]string, bool) {
	b, err := os.ReadFile(filepath.Join(string(d), filepath.FromSlash(path)))
	if err != nil {
		return nil, false
	}
	return Headings(string(b)), true
}
