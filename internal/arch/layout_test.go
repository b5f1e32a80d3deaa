package arch

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// layoutNames are the packages docs/design.md's layout table names: the
// backquoted names in the first cell of each row of its "Layout" section.
func layoutNames(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Layout\n")
	if !ok {
		t.Fatal(`docs/design.md has no "## Layout" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	quoted := regexp.MustCompile("`([^`]+)`")
	names := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		for _, m := range quoted.FindAllStringSubmatch(cells[1], -1) {
			names[m[1]] = true
		}
	}
	return names
}

// The layout table of docs/design.md names every package of the module,
// and no package that is not one: a newcomer finds each there.
func TestLayoutTableComplete(t *testing.T) {
	pkgs := loadPackages(t)
	names := layoutNames(t)
	for path := range pkgs {
		if rel := strings.TrimPrefix(path, "ferry/"); !names[rel] {
			t.Errorf("package %s is not in docs/design.md's layout table", rel)
		}
	}
	for name := range names {
		if pkgs["ferry/"+name] == nil {
			t.Errorf("docs/design.md's layout table names %s, which is no package", name)
		}
	}
}
