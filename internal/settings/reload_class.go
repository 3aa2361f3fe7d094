package settings

// Class says whether a setting changed in the settings source takes effect
// while the gateway runs (Warm) or only at the next start (Cold).
type Class string

// The reload classes.
const (
	// Warm settings are swapped in between requests: a request keeps the
	// settings it started with, the next one gets the new ones.
	Warm Class = "WARM"
	// Cold settings bind the process (its listener, stores and queues,
	// identities, exporters, memory). A change in the source is not
	// applied: it is reported pending until a restart.
	Cold Class = "COLD"
)

// Classes is the Reload column of docs/settings.md: every setting of
// Settings, and the settings of the source itself. A setting added to
// Settings must be added here too (TestEverySettingHasAClass says
// which one is missing).
var Classes = map[string]Class{
	// Deadlines and their margins.
	"DefaultTTLSecs":        Warm,
	"Timeout":               Warm,
	"AsyncTriggerTimeout":   Warm,
	"AsyncTimeout":          Warm,
	"AsyncTTLSecs":          Warm,
	"FunctionLimitMarginMs": Warm,
	"ClientBodyTimeoutMs":   Warm,
	// Backends, routes and their upstream policy.
	"Hosts":                     Warm,
	"Routes":                    Warm,
	"MaxAttempts":               Warm,
	"RetryBackoffMs":            Warm,
	"RetryBudgetPercent":        Warm,
	"RetryBudgetMinConcurrency": Warm,
	"LoadBalanceMode":           Warm,
	"RetryOnStatusCodes":        Warm,
	// Requests and answers.
	"UserProfiles":            Warm,
	"MaxRetryBodyBytes":       Warm,
	"PublicBaseURL":           Warm,
	"TrustedProxies":          Warm,
	"AsyncInlineResultBytes":  Warm,
	"EmfNamespace":            Warm,
	"GatewayEndpointLogLevel": Warm,

	// What binds the process.
	"ListenAddr":                 Cold,
	"FunctionTimeoutSecs":        Cold,
	"InvokeMode":                 Cold,
	"MaxBufferedBytes":           Cold, // a memory limit: the process-wide body budget
	"MaxResponseHeaderBytes":     Cold, // the backend transport is built at start-up
	"AsyncModeEnabled":           Cold, // opens (or not) the store and queue
	"AsyncStore":                 Cold,
	"AsyncQueue":                 Cold,
	"AzureWebJobsStorage":        Cold,
	"NotificationTopicArns":      Cold,
	"MaxContinuations":           Cold,
	"MaxContinuationsPerProfile": Cold,
	"IdempotencyScopeHeaders":    Cold, // the scope of keys already stored
	"AsyncPredictWindow":         Cold, // the predictor is built with the async engine
	"AsyncPollMaxSecs":           Cold, // the poll policy is built with the async engine

	// The source itself: read from the environment only.
	SourceSetting:   Cold,
	RefreshSetting:  Cold,
	OptionalSetting: Cold,
	PrefixSetting:   Cold,
	LabelSetting:    Cold,
}

// Secret settings carry a credential: the settings view never shows their
// value, only whether they are set.
var Secret = map[string]bool{
	"AzureWebJobsStorage": true,
	SourceSetting:         true, // a connection string, or a URL with a SAS
}
