package dynamostore

const childEnv = "SLUICE_DYNAMOSTORE_CRASH_CHILD"

func crashChild() int { return 1 }
