package weaviate

import "testing"

func TestRanks(t *testing.T) {
	for _, tc := range []struct {
		explain      string
		alpha        float32
		bm25, vector int
	}{
		{"\nHybrid (Result Set keyword,bm25) Document 1c0f contributed 0.008196721 to the score\nHybrid (Result Set vector,hybridVector) Document 1c0f contributed 0.007936508 to the score", 0.5, 2, 4},
		{"\nHybrid (Result Set vector,hybridVector) Document x contributed 0.008333334 to the score", 0.5, 0, 1},
		{"\nHybrid (Result Set keyword,bm25) Document x contributed 0.0045454547 to the score", 0.5, 51, 0},
		// alpha 0.4/1.4: keyword 0.71428573/(i+60), vector 0.2857143/(i+60).
		{"\nHybrid (Result Set keyword,bm25) Document x contributed 0.011904762 to the score\nHybrid (Result Set vector,hybridVector) Document x contributed 0.0018083183 to the score", 0.4 / 1.4, 1, 99},
		// Lexical only (alpha 0): the keyword set weighs 1.
		{"\nHybrid (Result Set keyword,bm25) Document x contributed 0.014285714 to the score", 0, 11, 0},
		{"\nHybrid (Result Set vector,hybridVector) Document x contributed 0.014285714 to the score", 0, 0, 0},
		{"", 0.5, 0, 0},
		{"Hybrid (Result Set keyword,bm25) Document x contributed NaN to the score", 0.5, 0, 0},
	} {
		b, v := ranks(tc.explain, tc.alpha)
		if b != tc.bm25 || v != tc.vector {
			t.Errorf("ranks(%q) = %d, %d; want %d, %d", tc.explain, b, v, tc.bm25, tc.vector)
		}
	}
}

func FuzzRanks(f *testing.F) {
	f.Add("\nHybrid (Result Set keyword,bm25) Document 1 contributed 0.008196721 to the score")
	f.Add("Result Set vector contributed 1e-300 to the score")
	f.Fuzz(func(t *testing.T, s string) {
		b, v := ranks(s, 0.5)
		if b < 0 || v < 0 {
			t.Fatalf("negative rank from %q", s)
		}
	})
}
