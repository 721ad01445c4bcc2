package io.rebound.tests.parity;

/**
 * The bullets of docs/configuration.md's "Where rebound differs from Artemis" that the parity suite asserts:
 * a scenario touching one of them expects each broker's own behaviour ({@link Target#follows}).
 * {@link ParityTest#everyDifferenceIsListedInTheDocs} keeps each bullet and its constant together.
 */
enum Difference {
    DELAY_WHEN_A_CONSUMER_DIES("The redelivery delay also applies when a consumer's connection dies"),
    GROUP_ONE_AT_A_TIME("A message group has one message delivering at a time and keeps its order across failures and redelivery delays");

    /** The start of the bullet, as written there. */
    final String quoted;

    Difference(String quoted) {
        this.quoted = quoted;
    }
}
