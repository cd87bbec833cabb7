package kws

import (
	"strings"
	"testing"
)

func TestConfigMembersAndDefaults(t *testing.T) {
	c, err := parseConfig(`{"key": "rank", "weight": 3, "off": null}`)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := c.String("key", "x"); s != "rank" || err != nil {
		t.Fatalf("String: %q, %v", s, err)
	}
	if s, err := c.String("off", "x"); s != "x" || err != nil {
		t.Fatalf("a null member takes the default: %q, %v", s, err)
	}
	if n, err := c.Int("weight", 1); n != 3 || err != nil {
		t.Fatalf("Int: %d, %v", n, err)
	}
	if _, err := c.Int("key", 1); err == nil || err.Error() != `config "key": expected an integer` {
		t.Fatalf("Int of a string: %v", err)
	}
	if _, err := parseConfig(`[1]`); err == nil || !strings.Contains(err.Error(), "not a JSON object") {
		t.Fatalf("an array: %v", err)
	}
}

func TestDecodeRefusesUnknownMembersAndReadsAnEmptyConfig(t *testing.T) {
	var v struct {
		Key string `json:"key"`
	}
	c, _ := parseConfig(`{"key": "rank"}`)
	if err := c.Decode(&v); err != nil || v.Key != "rank" {
		t.Fatalf("Decode: %+v, %v", v, err)
	}
	c, _ = parseConfig(`{"kye": "rank"}`)
	if err := c.Decode(&v); err == nil || !strings.Contains(err.Error(), "kye") {
		t.Fatalf("a misspelt key: %v", err)
	}
	c, err := parseConfig("")
	if err != nil || c.Decode(&v) != nil {
		t.Fatalf("an empty configuration is {}: %v", err)
	}
}

func TestScaleToMaxMatchesTheRustSDK(t *testing.T) {
	s := []int64{10, 5, 0, -3, 7}
	ScaleToMax(s, MaxNodeScore)
	if want := []int64{100, 50, 0, 0, 70}; !equal(s, want) {
		t.Fatalf("%v, want %v", s, want)
	}
	big := []int64{1<<63 - 1, 1 << 62}
	ScaleToMax(big, MaxNodeScore)
	if want := []int64{100, 50}; !equal(big, want) {
		t.Fatalf("%v, want %v", big, want)
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
