package async

import (
	"fmt"
	"slices"

	"fngateway/core"
)

// TopicChecker is an optional capability of a Notifier: it tells, without
// sending anything, whether the store accepts a topic name (the file
// store's JSON-lines files, an Azure queue name, an SQS queue name).
type TopicChecker interface {
	// CheckTopic returns an error saying what a valid name is when topic
	// is not one.
	CheckTopic(topic string) error
}

// ValidateTopics checks every profile's async-config.topic in p against n,
// so that a topic the store cannot accept stops the start-up instead of
// losing every notification. A Notifier that is not a TopicChecker accepts
// every topic. The error is a *core.SettingError naming UserProfiles.
func ValidateTopics(p map[string]core.Profile, n Notifier) error {
	tc, ok := n.(TopicChecker)
	if !ok {
		return nil
	}
	ids := make([]string, 0, len(p))
	for id := range p {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		topic := p[id].Async.Topic
		if topic == "" {
			continue
		}
		if err := tc.CheckTopic(topic); err != nil {
			return &core.SettingError{Name: "UserProfiles", Value: fmt.Sprintf("profile %q async-config.topic %q", id, topic),
				Want: "want a topic name the async store accepts: " + err.Error()}
		}
	}
	return nil
}
