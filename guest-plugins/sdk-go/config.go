package kws

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Config is the plugin's configuration: pluginConfig[].args.config from the scheduler's configuration, which the
// host hands over as JSON ("{}" when none is given).
type Config struct {
	raw string
	doc map[string]json.RawMessage
}

// parseConfig parses the host's JSON; the configuration must be an object, as the scheduler's own args are.
func parseConfig(raw string) (*Config, error) {
	c := &Config{raw: raw}
	if strings.TrimSpace(raw) == "" {
		raw = "{}" // as the Rust SDK reads an empty configuration
	}
	if err := json.Unmarshal([]byte(raw), &c.doc); err != nil {
		return nil, fmt.Errorf("config: not a JSON object: %v", err)
	}
	return c, nil
}

// Raw is the configuration's JSON text as the host sent it.
func (c *Config) Raw() string { return c.raw }

// Decode unmarshals the whole configuration into v (a pointer to a struct with json tags), refusing members
// v does not have, so a misspelt key is an error rather than a silently ignored setting.
func (c *Config) Decode(v any) error {
	text := c.raw
	if strings.TrimSpace(text) == "" {
		text = "{}"
	}
	d := json.NewDecoder(strings.NewReader(text))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("config: %v", err)
	}
	return nil
}

// member is the top-level member key, or nil when it is absent or null.
func (c *Config) member(key string) json.RawMessage {
	m := c.doc[key]
	if bytes.Equal(m, []byte("null")) {
		return nil
	}
	return m
}

// String is the top-level string member key, def when it is absent or null, an error when it is not a string.
func (c *Config) String(key, def string) (string, error) {
	m := c.member(key)
	if m == nil {
		return def, nil
	}
	var s string
	if err := json.Unmarshal(m, &s); err != nil {
		return "", fmt.Errorf("config %q: expected a string", key)
	}
	return s, nil
}

// Int is the top-level integer member key, def when it is absent or null, an error when it is not an integer.
func (c *Config) Int(key string, def int64) (int64, error) {
	m := c.member(key)
	if m == nil {
		return def, nil
	}
	var n int64
	if err := json.Unmarshal(m, &n); err != nil {
		return 0, fmt.Errorf("config %q: expected an integer", key)
	}
	return n, nil
}
