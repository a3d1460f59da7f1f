package config

import (
	"strings"
	"testing"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
)

// The keys of DCM's newer contract: seed, ACTIVE, codes and 24h by default; each settable by its environment
// variable; anything else refused with the key named.
func TestDCMKeys(t *testing.T) {
	c, err := load(t, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.StatusVocabulary != status.VocabularySeed || c.ActiveStatus != "ACTIVE" || c.ProblemTypes != ProblemTypeCodes || c.DeleteKeyRetention != 24*time.Hour {
		t.Fatalf("defaults: %q %q %q %v", c.StatusVocabulary, c.ActiveStatus, c.ProblemTypes, c.DeleteKeyRetention)
	}
	env := map[string]string{"SP_STATUS_VOCABULARY": "dcm-2026", "SP_ACTIVE_STATUS": "RUNNING", "SP_PROBLEM_TYPES": "uris", "SP_DELETE_KEY_RETENTION": "2h"}
	if c, err = load(t, nil, env, ""); err != nil {
		t.Fatal(err)
	}
	if c.StatusVocabulary != status.VocabularyDCM2026 || c.ActiveStatus != "RUNNING" || c.ProblemTypes != ProblemTypeURIs || c.DeleteKeyRetention != 2*time.Hour {
		t.Fatalf("from the environment: %q %q %q %v", c.StatusVocabulary, c.ActiveStatus, c.ProblemTypes, c.DeleteKeyRetention)
	}
	for env, want := range map[string]string{
		"SP_STATUS_VOCABULARY":    "statusVocabulary: \"dcm\" must be seed or dcm-2026",
		"SP_ACTIVE_STATUS":        "activeStatus: \"dcm\" must be ACTIVE or RUNNING",
		"SP_PROBLEM_TYPES":        "problemTypes: \"dcm\" must be codes or uris",
		"SP_DELETE_KEY_RETENTION": "deleteKeyRetention: must be positive",
	} {
		value := "dcm"
		if env == "SP_DELETE_KEY_RETENTION" {
			value = "0s"
		}
		if _, err := load(t, nil, map[string]string{env: value}, ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s=%s: %v, want %q", env, value, err, want)
		}
	}
}
