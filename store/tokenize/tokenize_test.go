package tokenize

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTerms(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"Read_File failed: ENOENT", []string{"read_file", "read", "file", "failed", "enoent"}},
		{"fs.read_file /tmp/a.txt", []string{"fs.read_file", "read_file", "fs", "read", "file", "tmp/a.txt", "tmp", "a", "txt"}},
		{"HTTP 429 Too-Many", []string{"http", "429", "too-many", "too", "many"}},
		{"trailing_ dash- ", []string{"trailing", "dash"}},
		{"Ünïcödé STRASSE", []string{"ünïcödé", "strasse"}},
		{"读取文件失败", []string{"读取", "取文", "文件", "件失", "失败"}},
		{"文", []string{"文"}},
		{"error: 文件不存在 (ENOENT)", []string{"error", "文件", "件不", "不存", "存在", "enoent"}},
		{"東京タワー", []string{"東京", "京タ", "タワ", "ワー"}},
		{"파일을 찾을 수 없음", []string{"파일", "일을", "찾을", "수", "없음"}},
		{"", nil},
		{"!!! ... ---", nil},
	} {
		if got := Terms(nil, tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Terms(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestIndexTermsDropsStopWords(t *testing.T) {
	got := IndexTerms([]string{"keep"}, "The file is not in the directory")
	if want := []string{"keep", "file", "directory"}; !slices.Equal(got, want) {
		t.Fatalf("IndexTerms = %q, want %q", got, want)
	}
}

func FuzzTerms(f *testing.F) {
	for _, s := range []string{"read_file ENOENT", "读取文件失败", "a_.b", "x-", "\xff\xfe", "東京タワー 파일"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, term := range Terms(nil, s) {
			if term == "" {
				t.Fatalf("empty term from %q", s)
			}
			if utf8.ValidString(s) && !utf8.ValidString(term) {
				t.Fatalf("invalid UTF-8 term %q from %q", term, s)
			}
			if term != strings.ToLower(term) {
				t.Fatalf("term %q not lowercase", term)
			}
		}
	})
}
