package io.rebound.jms;

import io.rebound.client.ReboundException;
import jakarta.jms.InvalidDestinationException;
import jakarta.jms.InvalidSelectorException;
import jakarta.jms.JMSException;
import jakarta.jms.JMSRuntimeException;
import jakarta.jms.JMSSecurityException;
import jakarta.jms.JMSSecurityRuntimeException;
import jakarta.jms.InvalidDestinationRuntimeException;
import jakarta.jms.InvalidSelectorRuntimeException;

/** The provider's errors: broker failures as typed {@link JMSException}s keeping the client's exception as the linked one. */
final class Jms {
    private Jms() {}

    /** A broker failure as the JMS exception a program branches on; the error code is the gRPC code's name. */
    static JMSException wrap(ReboundException e) {
        String code = e.code().name();
        JMSException jms = switch (e.code()) {
            case UNAUTHENTICATED, PERMISSION_DENIED -> new JMSSecurityException(e.getMessage(), code);
            case NOT_FOUND -> new InvalidDestinationException(e.getMessage(), code);
            default -> e.getMessage().contains("selector") || e.getMessage().contains("filter")
                    ? new InvalidSelectorException(e.getMessage(), code)
                    : new JMSException(e.getMessage(), code);
        };
        jms.setLinkedException(e);
        jms.initCause(e);
        return jms;
    }

    /** A feature the provider does not offer; docs/clients.md's JMS table lists them. */
    static JMSException unsupported(String what) {
        return new JMSException(what + " is not supported by rebound's JMS provider (see docs/clients.md, \"JMS\")", "UNSUPPORTED");
    }

    /** The unchecked form, for {@code JMSContext} and its producers and consumers. */
    static JMSRuntimeException unchecked(JMSException e) {
        JMSRuntimeException runtime;
        if (e instanceof JMSSecurityException) {
            runtime = new JMSSecurityRuntimeException(e.getMessage(), e.getErrorCode(), e);
        } else if (e instanceof InvalidDestinationException) {
            runtime = new InvalidDestinationRuntimeException(e.getMessage(), e.getErrorCode(), e);
        } else if (e instanceof InvalidSelectorException) {
            runtime = new InvalidSelectorRuntimeException(e.getMessage(), e.getErrorCode(), e);
        } else {
            runtime = new JMSRuntimeException(e.getMessage(), e.getErrorCode(), e);
        }
        return runtime;
    }

    /** Runs a provider call for the unchecked API. */
    static <T> T unchecked(Call<T> call) {
        try {
            return call.run();
        } catch (JMSException e) {
            throw unchecked(e);
        }
    }

    static void uncheckedRun(VoidCall call) {
        try {
            call.run();
        } catch (JMSException e) {
            throw unchecked(e);
        }
    }

    /** Runs a client call, turning its failures into JMS exceptions. */
    static <T> T call(Call<T> call) throws JMSException {
        try {
            return call.run();
        } catch (ReboundException e) {
            throw wrap(e);
        }
    }

    static void run(VoidCall call) throws JMSException {
        try {
            call.run();
        } catch (ReboundException e) {
            throw wrap(e);
        }
    }

    @FunctionalInterface
    interface Call<T> {
        T run() throws JMSException;
    }

    @FunctionalInterface
    interface VoidCall {
        void run() throws JMSException;
    }
}
