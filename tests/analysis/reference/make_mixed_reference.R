# The reference for analysis.mixed: lme4's REML fits (and, for comparison, ordinal's clmm) on fixed
# data sets of individual Task 1 reads, stored with the data.
#
#   Rscript tests/analysis/reference/make_mixed_reference.R
#
# regenerates mixed/<name>.csv (the reads, drawn here with a seed) and mixed/<name>.json (the fits).
# Needs Debian's r-base-core, r-cran-lme4, r-cran-lmertest, r-cran-ordinal and r-cran-jsonlite; neither the application
# nor CI runs it: the tests read the stored files.
suppressMessages({
  library(lme4)
  library(lmerTest, exclude = "lmer")
  library(ordinal)
  library(jsonlite)
})

here <- dirname(normalizePath(sub("--file=", "", grep("--file=", commandArgs(FALSE), value = TRUE))))
out <- file.path(here, "mixed")
dir.create(out, showWarnings = FALSE)

# Reads as a study with versions kept apart gives them: two readers read the original of a pair, two
# others its alternative; a reader's severity, an exam's difficulty and the variation's effect add up
# on a latent scale cut into Realistic / Minor / Major.
draw <- function(seed, variations, pairs, exams, readers, effect) {
  set.seed(seed)
  severity <- rnorm(readers, 0, 0.35)
  difficulty <- rnorm(exams, 0, 0.35)
  shift <- setNames(rnorm(variations, effect, 0.25), sprintf("v%02d", seq_len(variations)))
  rows <- list()
  for (v in names(shift)) {
    for (exam in sample(exams, pairs)) {
      who <- sample(readers, 4)
      for (k in 1:2) {
        for (reader in who[(2 * k - 1):(2 * k)]) {
          alternative <- k - 1
          latent <- 0.45 + alternative * shift[[v]] + severity[reader] + difficulty[exam] + rnorm(1, 0, 0.55)
          rows[[length(rows) + 1]] <- data.frame(
            variation = v, exam = sprintf("e%03d", exam), reader = sprintf("r%02d", reader),
            alternative = alternative, score = as.integer(min(2, max(0, round(latent))))
          )
        }
      }
    }
  }
  do.call(rbind, rows)
}

control <- lmerControl(optimizer = "bobyqa", optCtrl = list(rhoend = 1e-12, maxfun = 1e5),
                       check.conv.singular = "ignore")

lmm <- function(formula, data) {
  fit <- lmer(formula, data = data, REML = TRUE, control = control)
  components <- as.data.frame(VarCorr(fit))
  wald <- confint(fit, parm = "alternative", method = "Wald")
  # Satterthwaite's degrees of freedom for the alternative's t test, as lmerTest's summary gives them.
  satterthwaite <- contest1D(as_lmerModLmerTest(fit), L = c(0, 1), confint = TRUE)
  list(
    beta = unname(fixef(fit)), se = unname(sqrt(diag(as.matrix(vcov(fit))))),
    variances = setNames(as.list(components$vcov), ifelse(is.na(components$var1), "residual", components$grp)),
    ci = unname(wald[1, ]), reml_deviance = REMLcrit(fit),
    satterthwaite = list(df = satterthwaite$df, p = satterthwaite[["Pr(>|t|)"]],
                         ci = c(satterthwaite$lower, satterthwaite$upper))
  )
}

# The logistic model of "Realistic" (score 0), fitted by Laplace's approximation as glmer fits it by
# default (nAGQ = 1), with tolerances tight enough that the optimum is the function's, not the optimizer's.
gcontrol <- glmerControl(optimizer = "bobyqa", optCtrl = list(rhoend = 1e-12, maxfun = 1e5), tolPwrss = 1e-13,
                         check.conv.singular = "ignore", check.conv.grad = "ignore")

glmm <- function(formula, data) {
  fit <- glmer(formula, data = data, family = binomial, control = gcontrol)
  components <- as.data.frame(VarCorr(fit))
  list(
    beta = unname(fixef(fit)), se = unname(sqrt(diag(as.matrix(vcov(fit))))),
    se_rx = unname(sqrt(diag(as.matrix(vcov(fit, use.hessian = FALSE))))),
    theta = unname(getME(fit, "theta")),
    variances = setNames(as.list(components$vcov), components$grp),
    deviance = unname(-2 * as.numeric(logLik(fit))),
    p = unname(coef(summary(fit))["alternative", "Pr(>|z|)"])
  )
}

# "overshoot" is stored, not drawn: random scores on a live study's design on which an unbounded
# quasi-Newton search of theta ran to where X'V^-1 X could not be factorised (analysis.mixed.THETA_MAX).
for (set in list(
  list(name = "small", seed = 11, variations = 3, pairs = 8, exams = 16, readers = 8, effect = 0.35),
  list(name = "published", seed = 2026, variations = 12, pairs = 10, exams = 114, readers = 13, effect = 0.3),
  list(name = "overshoot", stored = TRUE)
)) {
  if (isTRUE(set$stored)) {
    data <- read.csv(file.path(out, paste0(set$name, ".csv")),
                     colClasses = c(variation = "character", exam = "character", reader = "character"))
  } else {
    data <- draw(set$seed, set$variations, set$pairs, set$exams, set$readers, set$effect)
    write.csv(data, file.path(out, paste0(set$name, ".csv")), row.names = FALSE, quote = FALSE)
  }
  fits <- list(
    overall = lmm(score ~ alternative + (1 | reader) + (1 | exam) + (1 | reader:variation), data),
    overall_without_interaction = lmm(score ~ alternative + (1 | reader) + (1 | exam), data)
  )
  for (v in sort(unique(data$variation))) {
    fits[[paste0("variation:", v)]] <- lmm(score ~ alternative + (1 | reader) + (1 | exam), data[data$variation == v, ])
  }
  data$realistic <- as.integer(data$score == 0)
  logistic <- list(
    overall = glmm(realistic ~ alternative + (1 | reader) + (1 | exam) + (1 | reader:variation), data),
    overall_without_interaction = glmm(realistic ~ alternative + (1 | reader) + (1 | exam), data)
  )
  for (v in sort(unique(data$variation))) {
    logistic[[paste0("variation:", v)]] <- glmm(realistic ~ alternative + (1 | reader) + (1 | exam),
                                                data[data$variation == v, ])
  }
  data$realistic <- NULL
  # For comparison only (another estimand, on the log-odds scale): the ordinal model.
  ordinal_data <- transform(data, score = factor(score, levels = 0:2, ordered = TRUE),
                            reader = factor(reader), exam = factor(exam))
  ordinal_fit <- clmm(score ~ alternative + (1 | reader) + (1 | exam), data = ordinal_data)
  ordinal_summary <- coef(summary(ordinal_fit))
  reference <- list(
    r_version = R.version.string, lme4 = as.character(packageVersion("lme4")),
    lmerTest = as.character(packageVersion("lmerTest")), ordinal = as.character(packageVersion("ordinal")),
    fits = fits, logistic = logistic,
    clmm = list(estimate = ordinal_summary["alternative", "Estimate"], se = ordinal_summary["alternative", "Std. Error"],
                p = ordinal_summary["alternative", "Pr(>|z|)"])
  )
  writeLines(toJSON(reference, auto_unbox = TRUE, digits = NA, pretty = TRUE), file.path(out, paste0(set$name, ".json")))
}
