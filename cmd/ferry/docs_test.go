package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// docFiles are the documents a user has: the README and docs/.
func docFiles(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	for _, p := range append(paths, "../../README.md") {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		docs[p] = string(b)
	}
	return docs
}

// commandLines are the ferry command lines a document shows: the lines of
// its code blocks that start with ferry (with the indented lines after
// them that go on with more options), split at ";", and its inline code
// that starts with ferry.
func commandLines(doc string) []string {
	var lines []string
	inBlock := false
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(l, "```") {
			inBlock = !inBlock
			continue
		}
		if !inBlock {
			for _, m := range inlineFerry.FindAllStringSubmatch(l, -1) {
				lines = append(lines, m[1])
			}
			continue
		}
		code := commentRE.ReplaceAllString(l, "")
		switch trimmed := strings.TrimSpace(code); {
		case strings.HasPrefix(trimmed, "ferry "):
			for _, part := range strings.Split(trimmed, ";") {
				lines = append(lines, strings.TrimSpace(part))
			}
		case len(lines) > 0 && code != trimmed && (strings.HasPrefix(trimmed, "[") || strings.HasPrefix(trimmed, "-")):
			lines[len(lines)-1] += " " + trimmed
		}
	}
	return lines
}

var (
	inlineFerry = regexp.MustCompile("`(ferry [^`]*)`")
	commentRE   = regexp.MustCompile(`\s#\s.*$`)
	flagRE      = regexp.MustCompile(`(?:^|[\s\[(|])(--?[a-zA-Z][a-zA-Z0-9-]*)`)
)

// resolve walks root's subcommands along the words of line after
// "ferry"; a word such as list|show names several, and so do the words
// of a list that options interrupt (list|show [-t]|events). It returns
// the commands reached and the rest of the line.
func resolve(root *cobra.Command, line string) ([]*cobra.Command, string) {
	words := strings.Fields(line)[1:]
	parents, cmds := []*cobra.Command{}, []*cobra.Command{root}
	children := func(of []*cobra.Command, word string) []*cobra.Command {
		var found []*cobra.Command
		for _, alt := range strings.Split(word, "|") {
			alt = strings.Trim(alt, "[]")
			for _, c := range of {
				for _, sub := range c.Commands() {
					if sub.Name() == alt || sub.HasAlias(alt) {
						found = append(found, sub)
					}
				}
			}
		}
		return found
	}
	i := 0
	for ; i < len(words); i++ {
		next := children(cmds, words[i])
		if len(next) == 0 {
			break
		}
		parents, cmds = cmds, next
	}
	for _, w := range words[i:] {
		if strings.Contains(w, "|") {
			cmds = append(cmds, children(parents, w)...)
		}
	}
	return cmds, strings.Join(words[i:], " ")
}

// hasFlag says whether c takes flag (--name or -n, or one of the
// globus-url-copy spellings that globusStyle rewrites), its own or
// inherited.
func hasFlag(c *cobra.Command, flag string) bool {
	flag = globusStyle([]string{flag, "1"})[0]
	if flag == "--help" || flag == "-h" {
		return true
	}
	for _, fs := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags(), c.InheritedFlags()} {
		if name, ok := strings.CutPrefix(flag, "--"); ok && fs.Lookup(name) != nil {
			return true
		}
		if name, ok := strings.CutPrefix(flag, "-"); ok && len(name) == 1 && fs.ShorthandLookup(name) != nil {
			return true
		}
	}
	return false
}

// TestDocsCommandsExist: every ferry command line in the README and
// docs/ names commands and options that exist.
func TestDocsCommandsExist(t *testing.T) {
	root := newRoot()
	for path, doc := range docFiles(t) {
		for _, line := range commandLines(doc) {
			cmds, rest := resolve(root, line)
			for _, m := range flagRE.FindAllStringSubmatch(rest, -1) {
				flag := m[1]
				ok := false
				for _, c := range cmds {
					ok = ok || hasFlag(c, flag)
				}
				if !ok {
					t.Errorf("%s: %q: %s takes no %s", filepath.Base(path), line, cmds[0].CommandPath(), flag)
				}
				if long := "-" + flag; ok && len(flag) > 2 && !strings.HasPrefix(flag, "--") {
					t.Errorf("%s: %q: %s is globus-url-copy's spelling; --help says %s", filepath.Base(path), line, flag, long)
				}
			}
		}
	}
}

// TestDocsFlagsExist: every --option the README and docs/ name in code
// is one of ferry's, or one of the other tools' they name.
func TestDocsFlagsExist(t *testing.T) {
	known := allFlags(newRoot())
	known["--no-verify-checksum"] = true // the negation of --verify-checksum
	code := regexp.MustCompile("`[^`]*`")
	for path, doc := range docFiles(t) {
		var spans []string
		inBlock := false
		for _, l := range strings.Split(doc, "\n") {
			switch {
			case strings.HasPrefix(l, "```"):
				inBlock = !inBlock
			case inBlock:
				spans = append(spans, l)
			default:
				spans = append(spans, code.FindAllString(l, -1)...)
			}
		}
		for _, s := range spans {
			if !strings.Contains(s, "ferry") && !strings.HasPrefix(strings.Trim(s, "`"), "--") {
				continue // another program's command line
			}
			for _, m := range regexp.MustCompile(`(?:^|[\s\[(|`+"`"+`])(--[a-z][a-z0-9-]*)`).FindAllStringSubmatch(s, -1) {
				if !known[m[1]] {
					t.Errorf("%s: %q names %s, which no ferry command takes", filepath.Base(path), s, m[1])
				}
			}
		}
	}
}

// TestHelpFlagsExist: the options each command's help names are
// options of ferry's, and the command's own where its help says
// "ferry ... --option".
func TestHelpFlagsExist(t *testing.T) {
	root := newRoot()
	known := allFlags(root)
	opt := regexp.MustCompile(`(?:^|[\s\[("'|])(--[a-z][a-z0-9-]*)`)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		texts := []string{c.Use, c.Short, c.Long, c.Example}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) { texts = append(texts, f.Usage) })
		for _, text := range texts {
			for _, m := range opt.FindAllStringSubmatch(text, -1) {
				if !known[m[1]] {
					t.Errorf("%s --help names %s, which no ferry command takes", c.CommandPath(), m[1])
				}
			}
		}
		for _, m := range flagRE.FindAllStringSubmatch(c.Use, -1) {
			if !hasFlag(c, m[1]) {
				t.Errorf("%s: its usage line names %s, which it does not take", c.CommandPath(), m[1])
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// allFlags are the options of root and its subcommands, as --name.
func allFlags(root *cobra.Command) map[string]bool {
	known := map[string]bool{"--help": true}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { known["--"+f.Name] = true })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { known["--"+f.Name] = true })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return known
}

// TestDocsLinksInside: every link of the README and docs/ is a web
// address or a file of the repository that exists, and a link to a
// heading of a document names a heading it has.
func TestDocsLinksInside(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)#]*)(#[^)]*)?\)`)
	docs := docFiles(t)
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for path, doc := range docs {
		for _, m := range link.FindAllStringSubmatch(doc, -1) {
			target, anchor := m[1], strings.TrimPrefix(m[2], "#")
			if strings.HasPrefix(target, "https://") || strings.HasPrefix(target, "http://") {
				continue
			}
			linked := filepath.Join(filepath.Dir(path), target)
			if target == "" {
				linked = path
			}
			if anchor != "" && strings.HasSuffix(linked, ".md") && !slices.Contains(headingAnchors(docs[linked]), anchor) {
				t.Errorf("%s: link %s#%s: %s has no such heading", filepath.Base(path), target, anchor, filepath.Base(linked))
			}
			if target == "" {
				continue
			}
			abs, err := filepath.Abs(linked)
			if err != nil {
				t.Fatal(err)
			}
			if rel, err := filepath.Rel(repo, abs); err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s: link %s points outside the repository", filepath.Base(path), target)
				continue
			}
			if _, err := os.Stat(abs); err != nil {
				t.Errorf("%s: link %s: %v", filepath.Base(path), target, err)
			}
		}
		for _, outside := range []string{"../shared", "/work/", "DESIGN.md"} {
			if strings.Contains(doc, outside) {
				t.Errorf("%s names %s, which is not in the repository", filepath.Base(path), outside)
			}
		}
	}
}

// headingAnchors are the anchors a document's headings (outside its code
// blocks) get, as GitHub makes them: lower case, spaces to hyphens,
// punctuation dropped.
func headingAnchors(doc string) []string {
	var anchors []string
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	inBlock := false
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(l, "```") {
			inBlock = !inBlock
		}
		if h, ok := strings.CutPrefix(l, "#"); ok && !inBlock {
			h = strings.TrimSpace(strings.TrimLeft(h, "#"))
			anchors = append(anchors, strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-"))
		}
	}
	return anchors
}
