//! The risk policy: what must happen before a tool of a given risk may run.

use tether_protocol::Risk;

/// What the risk policy requires before a call may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyDecision {
    /// Run it (`none`).
    Run,
    /// Run it and notify the user (`low`).
    RunAndNotify,
    /// Ask the user and run it only on an explicit yes (`high`, `critical`).
    AskApproval,
    /// Never run it (`blocked`).
    Refuse,
}

/// The decision for a risk level.
pub fn decide(risk: Risk) -> PolicyDecision {
    match risk {
        Risk::None => PolicyDecision::Run,
        Risk::Low => PolicyDecision::RunAndNotify,
        Risk::High | Risk::Critical => PolicyDecision::AskApproval,
        Risk::Blocked => PolicyDecision::Refuse,
    }
}

/// The risk a call runs under: the stricter of what the client declared and the server's floor.
/// A client can never lower the server's floor.
pub fn effective_risk(declared: Risk, server_floor: Risk) -> Risk {
    declared.stricter(server_floor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_level_maps_to_its_decision() {
        assert_eq!(decide(Risk::None), PolicyDecision::Run);
        assert_eq!(decide(Risk::Low), PolicyDecision::RunAndNotify);
        assert_eq!(decide(Risk::High), PolicyDecision::AskApproval);
        assert_eq!(decide(Risk::Critical), PolicyDecision::AskApproval);
        assert_eq!(decide(Risk::Blocked), PolicyDecision::Refuse);
    }

    #[test]
    fn the_server_floor_can_only_raise_the_risk() {
        for declared in Risk::ALL {
            for floor in Risk::ALL {
                let effective = effective_risk(declared, floor);
                assert!(effective >= declared && effective >= floor);
            }
        }
        assert_eq!(effective_risk(Risk::None, Risk::Critical), Risk::Critical);
    }
}
