//! The choices more than one family reads ([`Calibration`]), declared once
//! as [`crate::named_enum!`]s beside the shared parameters
//! ([`super::params::SHARED`]) that name them.

crate::named_enum! {
    /// Noise calibration of a private algorithm (each algorithm allows the
    /// ones its paper states: `exact` everywhere, `code` and `theorem` for
    /// Private-FedLinUCB, `paper` for FedUCB and P-FCB).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
    pub enum Calibration {
        /// The noise solved from the target by the exact accountant
        /// ([`crate::privacy::accountant::exact_sigma`]): `acct_epsilon` in
        /// [0.99, 1] x the target epsilon (for FedUCB, `acct_epsilon_sums`).
        Exact = "exact",
        /// Private-FedLinUCB: the authors' public code (which produced their
        /// plots).
        Code = "code",
        /// Private-FedLinUCB: the slides' theorem: sigma^2 = 8 kappa (log(2 /
        /// delta) + eps) / eps^2.
        Theorem = "theorem",
        /// FedUCB and P-FCB: the paper's constants.
        Paper = "paper",
    }
}
