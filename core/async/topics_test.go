package async

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"fngateway/core"
)

// topicNotifier accepts topics of lowercase letters only.
type topicNotifier struct{ fakeNotifier }

func (*topicNotifier) CheckTopic(topic string) error {
	if strings.Trim(topic, "abcdefghijklmnopqrstuvwxyz") != "" {
		return errors.New("want lowercase letters")
	}
	return nil
}

func TestValidateTopics(t *testing.T) {
	profiles := func(topics ...string) map[string]core.Profile {
		p := map[string]core.Profile{}
		for i, tp := range topics {
			id := "u" + strconv.Itoa(i)
			p[id] = core.Profile{UserID: id, Async: core.AsyncConfig{Enabled: true, Topic: tp}}
		}
		return p
	}
	tests := []struct {
		name    string
		p       map[string]core.Profile
		n       Notifier
		wantErr string
	}{
		{"valid topics", profiles("events", "", "other"), &topicNotifier{}, ""},
		{"bad topic", profiles("events", "bad/topic"), &topicNotifier{}, `setting UserProfiles="profile \"u1\" async-config.topic \"bad/topic\"": want a topic name the async store accepts: want lowercase letters`},
		{"notifier that cannot check", profiles("bad/topic"), &fakeNotifier{}, ""},
		{"no notifier", profiles("bad/topic"), nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateTopics(tt.p, tt.n)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ValidateTopics = %v; want nil", err)
				}
				return
			}
			var se *core.SettingError
			if !errors.As(err, &se) || se.Name != "UserProfiles" || err.Error() != tt.wantErr {
				t.Fatalf("ValidateTopics = %v;\nwant %s", err, tt.wantErr)
			}
		})
	}
}
