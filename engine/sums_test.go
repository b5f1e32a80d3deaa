package engine

import (
	"maps"
	"testing"
)

func TestParseSumList(t *testing.T) {
	list := "d41d8cd98f00b204e9800998ecf8427e  empty\n" +
		"0cc175b9c0f1b6a831c399e269772661  dir/a b\n" +
		"\\92eb5ffee6ae2fec3ad71c777531578f  back\\\\slash\\nnewline\n" +
		"4A8A08F09D37B73795649038408B5F33 *binary\n" +
		"garbage\n" +
		"e1671797c52e15f763380b45e841ec32  /abs/path\n"
	want := map[string]string{
		"empty":                "d41d8cd98f00b204e9800998ecf8427e",
		"dir/a b":              "0cc175b9c0f1b6a831c399e269772661",
		"back\\slash\nnewline": "92eb5ffee6ae2fec3ad71c777531578f",
		"binary":               "4a8a08f09d37b73795649038408b5f33",
		"/abs/path":            "e1671797c52e15f763380b45e841ec32",
	}
	if got := parseSumList([]byte(list)); !maps.Equal(got, want) {
		t.Errorf("parseSumList = %q, want %q", got, want)
	}
}
