//! Credit accounting (MS-SMB2 3.2.4.1.5, 3.2.5.1.4) as plain data: how many
//! credits to ask for so the window grows toward the pipeline depth.

/// Most credits the window holds (available plus in flight): what 16-bit
/// CreditCharges over a 64-bit MessageId space can ever use in one window.
pub const MAX_CREDITS: u32 = u16::MAX as u32;

/// Tracks the client's credit window. `available` credits may be spent now;
/// `in_flight` are charged to requests still awaiting their final response.
#[derive(Debug, Clone)]
pub struct CreditWindow {
    /// Credits held and not spent.
    pub available: u32,
    /// Credits charged to outstanding requests.
    pub in_flight: u32,
    /// Window the client tries to reach, in credits.
    pub target: u32,
}

impl CreditWindow {
    /// A fresh connection holds one credit (MS-SMB2 3.2.4.1.5).
    pub fn new(target: u32) -> Self {
        CreditWindow { available: 1, in_flight: 0, target }
    }

    /// CreditRequest for a message charging `charge`: its own charge plus a
    /// share of what is missing to reach the target.
    pub fn request_for(&self, charge: u16) -> u16 {
        let held = self.available + self.in_flight;
        let boost = self.target.saturating_sub(held).min(256);
        (charge as u32 + boost).min(u16::MAX as u32) as u16
    }

    /// Spends `charge` credits; returns false (and spends nothing) if not
    /// enough are available.
    pub fn try_spend(&mut self, charge: u32) -> bool {
        if charge > self.available {
            return false;
        }
        self.available -= charge;
        self.in_flight += charge;
        true
    }

    /// Records a response granting `granted` credits; `final_charge` is the
    /// charge of the request it completes (0 for an interim response).
    /// Grants saturate: the window never holds more than [`MAX_CREDITS`],
    /// whatever a server sends.
    pub fn on_response(&mut self, granted: u16, final_charge: u32) {
        self.in_flight = self.in_flight.saturating_sub(final_charge);
        let room = MAX_CREDITS.saturating_sub(self.in_flight);
        self.available = self.available.saturating_add(granted as u32).min(room);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_toward_target_and_never_overspends() {
        let mut w = CreditWindow::new(512);
        assert_eq!(w.request_for(1), 257);
        assert!(w.try_spend(1));
        assert!(!w.try_spend(1), "only one credit before any grant");
        w.on_response(257, 1);
        assert_eq!(w.available, 257);
        assert_eq!(w.in_flight, 0);
        assert!(w.try_spend(128));
        assert_eq!(w.request_for(128), 128 + 255);
        w.on_response(0, 0); // interim response grants nothing
        assert_eq!(w.in_flight, 128);
        w.on_response(600, 128);
        assert_eq!(w.request_for(1), 1, "at target: ask only for the charge");
    }

    #[test]
    fn grants_saturate_at_the_cap() {
        let mut w = CreditWindow::new(512);
        for _ in 0..10 {
            w.on_response(u16::MAX, 0);
        }
        assert_eq!(w.available, MAX_CREDITS);
        assert!(w.try_spend(100));
        w.on_response(u16::MAX, 0);
        assert_eq!(w.available + w.in_flight, MAX_CREDITS);
    }
}
